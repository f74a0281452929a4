package history

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Text is a spec's YAML as stored. It encodes as a string, in JSON and in
// YAML (a literal block there), so that `vnet history -o json|yaml` shows
// the spec readably rather than as base64; bytes that are not UTF-8 (a
// spec in UTF-16) encode as {base64: ...}, which reads back the same.
type Text []byte

type binaryText struct {
	Base64 string `json:"base64" yaml:"base64"`
}

// MarshalJSON encodes the text as a JSON string.
func (t Text) MarshalJSON() ([]byte, error) {
	if utf8.Valid(t) {
		return json.Marshal(string(t))
	}
	return json.Marshal(binaryText{base64.StdEncoding.EncodeToString(t)})
}

// UnmarshalJSON reads either form.
func (t *Text) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*t = Text(s)
		return nil
	}
	var bin binaryText
	if err := json.Unmarshal(b, &bin); err != nil {
		return fmt.Errorf("spec text: %w", err)
	}
	return t.fromBase64(bin.Base64)
}

// MarshalYAML encodes the text as a YAML string.
func (t Text) MarshalYAML() (any, error) {
	if utf8.Valid(t) {
		return string(t), nil
	}
	return binaryText{base64.StdEncoding.EncodeToString(t)}, nil
}

// UnmarshalYAML reads either form.
func (t *Text) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		var s string
		if err := n.Decode(&s); err != nil {
			return fmt.Errorf("spec text: %w", err)
		}
		*t = Text(s)
		return nil
	}
	var bin binaryText
	if err := n.Decode(&bin); err != nil {
		return fmt.Errorf("spec text: %w", err)
	}
	return t.fromBase64(bin.Base64)
}

func (t *Text) fromBase64(s string) error {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return fmt.Errorf("spec text: %w", err)
	}
	*t = b
	return nil
}
