package store

import (
	"errors"
	"testing"
)

func TestBoltRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenBolt(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Get("x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get missing: %v", err)
	}
	for _, n := range []string{"b", "a"} {
		if err := s.Put(&Record{Name: n, Spec: []byte("name: " + n), Generation: 1}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := s.Get("a")
	if err != nil || string(r.Spec) != "name: a" {
		t.Fatalf("Get = %+v, %v", r, err)
	}
	all, _ := s.List()
	if len(all) != 2 || all[0].Name != "a" {
		t.Fatalf("List = %v", all)
	}
	if err := s.Delete("a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("a"); err != nil {
		t.Fatal("second delete:", err)
	}
}
