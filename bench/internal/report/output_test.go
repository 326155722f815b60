package report

import (
	"os"
	"path/filepath"
	"testing"
)

func TestOutput(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	o := Output{Dir: dir}
	path, err := o.Write("r.md", "# r\n")
	if b, rerr := os.ReadFile(filepath.Join(dir, "r.md")); err != nil || rerr != nil || string(b) != "# r\n" || path != filepath.Join(dir, "r.md") {
		t.Fatalf("Write: %q, %v; read %q, %v", path, err, b, rerr)
	}
	if err := o.WriteJSON(1); err != nil {
		t.Errorf("WriteJSON without a file: %v", err)
	}
	o.JSON = filepath.Join(dir, "r.json")
	if err := o.WriteJSON(map[string]int{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(o.JSON); string(b) != "{\n  \"a\": 1\n}" {
		t.Errorf("WriteJSON wrote %q", b)
	}
	img, err := Plots(o, func(dir string) (string, error) { return dir, nil })
	if st, serr := os.Stat(img); err != nil || serr != nil || !st.IsDir() || img != filepath.Join(dir, "img") {
		t.Errorf("Plots: %q, %v, %v", img, err, serr)
	}
}
