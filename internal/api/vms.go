package api

import (
	"fmt"
	"net/http"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/vnet-project/vnet/internal/service"
	"github.com/vnet-project/vnet/internal/spec"
)

// One VM of an infrastructure's spec is a resource of its own
// (/api/v1/infras/{name}/vms/{vm}): a PUT or a DELETE of it is the
// service's edit of the spec in force (service.VMEdit), applied as a PUT
// of the whole spec with that edit would be, and sends one VM's entry
// rather than every VM's.

// vmNameOf is the {vm} of a request, checked as the spec names VMs.
func vmNameOf(r *http.Request) (string, error) {
	vm := r.PathValue("vm")
	if len(vm) > maxObjectName || !infraName.MatchString(vm) {
		return "", failField(http.StatusBadRequest, "vm", fmt.Sprintf("not a VM name (lowercase letters, digits and -, at most %d)", maxObjectName))
	}
	return vm, nil
}

// namesOf is a VM request's {name} and {vm}, checked.
func namesOf(r *http.Request) (name, vm string, err error) {
	if name, err = nameOf(r); err != nil {
		return "", "", err
	}
	vm, err = vmNameOf(r)
	return name, vm, err
}

func (s *Server) getVM(w http.ResponseWriter, r *http.Request, _ string) error {
	name, vmName, err := namesOf(r)
	if err != nil {
		return err
	}
	doc, err := s.be.Spec(r.Context(), name)
	if err != nil {
		return err
	}
	vm, ok := doc.Spec.VM(vmName)
	if !ok {
		return fmt.Errorf("%s has no VM %q: %w", name, vmName, service.ErrNoVM)
	}
	// The entry as a PUT of it takes it back: one line of YAML's flow
	// style, or the same fields as JSON.
	entry := spec.FlowVM(*vm)
	if wantsYAML(r.Header.Get("Accept")) {
		w.Header().Set("Content-Type", "application/yaml")
		_, err := w.Write([]byte(entry + "\n"))
		return err
	}
	var fields map[string]any
	if err := yaml.Unmarshal([]byte(entry), &fields); err != nil {
		return fmt.Errorf("VM %s as JSON: %w", vmName, err)
	}
	writeJSON(w, http.StatusOK, fields)
	return nil
}

func (s *Server) putVM(w http.ResponseWriter, r *http.Request, who string) error {
	name, vm, err := namesOf(r)
	if err != nil {
		return err
	}
	observe := s.observeApply(r, time.Now())
	e := service.VMEdit{Infra: name, VM: vm}
	done, err := s.decodeBody(w, r, name, func(file string, body []byte, isJSON bool) (err error) {
		e.File = file
		e.Entry, err = decodeVMBody(file, body, isJSON)
		return err
	})
	if err != nil {
		observe("invalid")
		return err
	}
	defer done()
	return s.applyEdit(w, r, who, observe, e)
}

func (s *Server) deleteVM(w http.ResponseWriter, r *http.Request, who string) error {
	name, vm, err := namesOf(r)
	if err != nil {
		return err
	}
	observe := s.observeApply(r, time.Now())
	return s.applyEdit(w, r, who, observe, service.VMEdit{Infra: name, VM: vm, File: bodyFile(r, name)})
}

// applyEdit applies the edit as putInfra applies a spec (answerApply).
func (s *Server) applyEdit(w http.ResponseWriter, r *http.Request, who string, observe func(string), e service.VMEdit) error {
	return s.answerApply(w, r, who, observe, func(opts service.ApplyOptions) (*service.ApplyResult, error) {
		return s.be.EditVM(r.Context(), e, opts)
	})
}

// decodeVMBody reads a body as one VM's entry (spec.DecodeVM); JSON is
// checked as JSON first, as decodeBody checks a spec's.
func decodeVMBody(file string, body []byte, isJSON bool) (*spec.VMEntry, error) {
	if len(body) == 0 {
		return nil, fail(http.StatusBadRequest, "the body is empty: send the VM's entry")
	}
	if isJSON {
		if err := checkJSON(body); err != nil {
			return nil, err
		}
	}
	return spec.DecodeVM(file, body)
}
