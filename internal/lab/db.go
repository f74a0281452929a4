package lab

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // database/sql driver "sqlite", pure Go
)

// The results database: every raw sample, every verdict and the machine's
// calibration of a run, so that `vnet lab report DIR` can rebuild the
// report without measuring.
const schema = `
CREATE TABLE IF NOT EXISTS runs (
  id INTEGER PRIMARY KEY, started TEXT NOT NULL, finished TEXT, machine TEXT NOT NULL,
  quick INTEGER NOT NULL, repeat INTEGER NOT NULL, command TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS samples (
  run_id INTEGER NOT NULL REFERENCES runs(id), experiment TEXT NOT NULL, series TEXT NOT NULL,
  label TEXT NOT NULL, metric TEXT NOT NULL, value REAL NOT NULL, unit TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS verdicts (
  run_id INTEGER NOT NULL REFERENCES runs(id), experiment TEXT NOT NULL, status TEXT NOT NULL,
  expected TEXT NOT NULL, observed TEXT NOT NULL, error TEXT NOT NULL, seconds REAL NOT NULL);
`

// columns added since the first schema; a database made before them gets
// them on open, so old runs still render.
var addedColumns = []struct{ table, column string }{
	{"runs", "calibration TEXT NOT NULL DEFAULT ''"},
	{"samples", "rep INTEGER NOT NULL DEFAULT 0"},
	{"verdicts", "scale REAL NOT NULL DEFAULT 1"},
	{"verdicts", "decided TEXT NOT NULL DEFAULT ''"},
	{"verdicts", "reason TEXT NOT NULL DEFAULT ''"},
	{"verdicts", "note TEXT NOT NULL DEFAULT ''"},
	{"verdicts", "flips TEXT NOT NULL DEFAULT ''"},
}

// DBFile is the database's name in an output directory.
const DBFile = "results.db"

// DB holds a lab's results.
type DB struct{ db *sql.DB }

// OpenDB opens (creating if needed) the results database in dir. Two runs
// writing one database wait for each other's writes rather than fail.
func OpenDB(dir string) (*DB, error) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, DBFile)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, err
	}
	if err := migrate(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("results database %s: %w", filepath.Join(dir, DBFile), err)
	}
	return &DB{db: db}, nil
}

func migrate(db *sql.DB) error {
	if _, err := db.Exec(schema); err != nil {
		return err
	}
	for _, c := range addedColumns {
		name, _, _ := strings.Cut(c.column, " ")
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM pragma_table_info(?) WHERE name = ?`, c.table, name).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			if _, err := db.Exec("ALTER TABLE " + c.table + " ADD COLUMN " + c.column); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close closes the database.
func (d *DB) Close() error { return d.db.Close() }

// RunInfo describes one `vnet lab run`.
type RunInfo struct {
	ID          int64
	Started     time.Time
	Finished    time.Time
	Machine     string
	Calibration *Calibration // nil for runs stored before calibrations were
	Quick       bool
	Repeat      int
	Command     string
}

func (d *DB) startRun(r *RunInfo) error {
	cal := ""
	if r.Calibration != nil {
		b, err := json.Marshal(r.Calibration)
		if err != nil {
			return err
		}
		cal = string(b)
	}
	res, err := d.db.Exec(`INSERT INTO runs(started, machine, quick, repeat, command, calibration) VALUES(?,?,?,?,?,?)`,
		r.Started.Format(time.RFC3339), r.Machine, r.Quick, r.Repeat, r.Command, cal)
	if err != nil {
		return err
	}
	r.ID, err = res.LastInsertId()
	return err
}

func (d *DB) finishRun(r *RunInfo) error {
	_, err := d.db.Exec(`UPDATE runs SET finished = ? WHERE id = ?`, r.Finished.Format(time.RFC3339), r.ID)
	return err
}

// addOutcome stores an experiment's samples and verdict in one transaction.
func (d *DB) addOutcome(run int64, o Outcome) error {
	tx, err := d.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, s := range o.Samples {
		if _, err := tx.Exec(`INSERT INTO samples(run_id, experiment, series, label, metric, value, unit, rep) VALUES(?,?,?,?,?,?,?,?)`,
			run, o.Experiment, s.Series, s.Label, s.Metric, s.Value, s.Unit, s.Rep); err != nil {
			return err
		}
	}
	v := o.Verdict
	if _, err := tx.Exec(`INSERT INTO verdicts(run_id, experiment, status, expected, observed, error, seconds, scale, decided, reason, note, flips)
		VALUES(?,?,?,?,?,?,?,?,?,?,?,?)`, run, o.Experiment, v.Status, v.Expected, v.Observed, o.Error, o.Seconds,
		float64(o.Scale.norm()), v.Decided, v.Reason, v.Note, v.Flips); err != nil {
		return err
	}
	return tx.Commit()
}

// LatestRun returns the newest run in the database.
func (d *DB) LatestRun() (*RunInfo, error) {
	r := &RunInfo{}
	var started, cal string
	var finished sql.NullString
	err := d.db.QueryRow(`SELECT id, started, finished, machine, quick, repeat, command, calibration FROM runs ORDER BY id DESC LIMIT 1`).
		Scan(&r.ID, &started, &finished, &r.Machine, &r.Quick, &r.Repeat, &r.Command, &cal)
	if err != nil {
		return nil, fmt.Errorf("no lab run in this database: %w", err)
	}
	r.Started, _ = time.Parse(time.RFC3339, started)
	if finished.Valid {
		r.Finished, _ = time.Parse(time.RFC3339, finished.String)
	}
	if cal != "" {
		r.Calibration = &Calibration{}
		if err := json.Unmarshal([]byte(cal), r.Calibration); err != nil {
			return nil, fmt.Errorf("run %d's calibration: %w", r.ID, err)
		}
	}
	return r, nil
}

// Outcome is one experiment's stored result.
type Outcome struct {
	Experiment string
	Verdict    Verdict
	Error      string
	Seconds    float64
	Scale      Scale // the line rates' scale it ran at
	Samples    Samples
}

// Outcomes reads a run's verdicts and samples, in catalogue order.
func (d *DB) Outcomes(run int64) ([]Outcome, error) {
	rows, err := d.db.Query(`SELECT experiment, status, expected, observed, error, seconds, scale, decided, reason, note, flips FROM verdicts WHERE run_id = ?`, run)
	if err != nil {
		return nil, err
	}
	byName := map[string]*Outcome{}
	for rows.Next() {
		o := &Outcome{}
		v := &o.Verdict
		if err := rows.Scan(&o.Experiment, &v.Status, &v.Expected, &v.Observed, &o.Error, &o.Seconds, &o.Scale, &v.Decided, &v.Reason, &v.Note, &v.Flips); err != nil {
			rows.Close()
			return nil, err
		}
		byName[o.Experiment] = o
	}
	rows.Close()
	srows, err := d.db.Query(`SELECT experiment, series, label, metric, value, unit, rep FROM samples WHERE run_id = ? ORDER BY rowid`, run)
	if err != nil {
		return nil, err
	}
	defer srows.Close()
	for srows.Next() {
		var exp string
		var s Sample
		if err := srows.Scan(&exp, &s.Series, &s.Label, &s.Metric, &s.Value, &s.Unit, &s.Rep); err != nil {
			return nil, err
		}
		if o, ok := byName[exp]; ok {
			o.Samples = append(o.Samples, s)
		}
	}
	var out []Outcome
	for _, e := range Catalog {
		if o, ok := byName[e.Name]; ok {
			out = append(out, *o)
		}
	}
	return out, srows.Err()
}
