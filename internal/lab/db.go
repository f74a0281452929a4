package lab

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // database/sql driver "sqlite", pure Go
)

// The results database: every raw sample and every verdict of a run, so
// that `vnet lab report DIR` can rebuild the report without measuring.
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

// DBFile is the database's name in an output directory.
const DBFile = "results.db"

// DB holds a lab's results.
type DB struct{ db *sql.DB }

// OpenDB opens (creating if needed) the results database in dir.
func OpenDB(dir string) (*DB, error) {
	db, err := sql.Open("sqlite", filepath.Join(dir, DBFile))
	if err != nil {
		return nil, err
	}
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("results database: %w", err)
	}
	return &DB{db: db}, nil
}

// Close closes the database.
func (d *DB) Close() error { return d.db.Close() }

// RunInfo describes one `vnet lab run`.
type RunInfo struct {
	ID       int64
	Started  time.Time
	Finished time.Time
	Machine  string
	Quick    bool
	Repeat   int
	Command  string
}

func (d *DB) startRun(r *RunInfo) error {
	res, err := d.db.Exec(`INSERT INTO runs(started, machine, quick, repeat, command) VALUES(?,?,?,?,?)`,
		r.Started.Format(time.RFC3339), r.Machine, r.Quick, r.Repeat, r.Command)
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

func (d *DB) addSample(run int64, exp string, s Sample) error {
	_, err := d.db.Exec(`INSERT INTO samples VALUES(?,?,?,?,?,?,?)`, run, exp, s.Series, s.Label, s.Metric, s.Value, s.Unit)
	return err
}

func (d *DB) addVerdict(run int64, exp string, v Verdict, errText string, secs float64) error {
	_, err := d.db.Exec(`INSERT INTO verdicts VALUES(?,?,?,?,?,?,?)`, run, exp, v.Status, v.Expected, v.Observed, errText, secs)
	return err
}

// LatestRun returns the newest run in the database.
func (d *DB) LatestRun() (*RunInfo, error) {
	r := &RunInfo{}
	var started string
	var finished sql.NullString
	err := d.db.QueryRow(`SELECT id, started, finished, machine, quick, repeat, command FROM runs ORDER BY id DESC LIMIT 1`).
		Scan(&r.ID, &started, &finished, &r.Machine, &r.Quick, &r.Repeat, &r.Command)
	if err != nil {
		return nil, fmt.Errorf("no lab run in this database: %w", err)
	}
	r.Started, _ = time.Parse(time.RFC3339, started)
	if finished.Valid {
		r.Finished, _ = time.Parse(time.RFC3339, finished.String)
	}
	return r, nil
}

// Outcome is one experiment's stored result.
type Outcome struct {
	Experiment string
	Verdict    Verdict
	Error      string
	Seconds    float64
	Samples    Samples
}

// Outcomes reads a run's verdicts and samples, in catalogue order.
func (d *DB) Outcomes(run int64) ([]Outcome, error) {
	rows, err := d.db.Query(`SELECT experiment, status, expected, observed, error, seconds FROM verdicts WHERE run_id = ?`, run)
	if err != nil {
		return nil, err
	}
	byName := map[string]*Outcome{}
	for rows.Next() {
		o := &Outcome{}
		if err := rows.Scan(&o.Experiment, &o.Verdict.Status, &o.Verdict.Expected, &o.Verdict.Observed, &o.Error, &o.Seconds); err != nil {
			rows.Close()
			return nil, err
		}
		byName[o.Experiment] = o
	}
	rows.Close()
	srows, err := d.db.Query(`SELECT experiment, series, label, metric, value, unit FROM samples WHERE run_id = ? ORDER BY rowid`, run)
	if err != nil {
		return nil, err
	}
	defer srows.Close()
	for srows.Next() {
		var exp string
		var s Sample
		if err := srows.Scan(&exp, &s.Series, &s.Label, &s.Metric, &s.Value, &s.Unit); err != nil {
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
