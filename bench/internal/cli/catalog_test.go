package cli

import (
	"slices"
	"testing"
)

func TestCatalogSelect(t *testing.T) {
	c := Catalog[string]{All: []string{"a", "b", "c"}, Name: func(s string) string { return s }, One: "letter", Many: "letters"}
	if got, err := c.Select(""); err != nil || !slices.Equal(got, c.All) {
		t.Errorf(`Select("") = %v, %v`, got, err)
	}
	if got, err := c.Select("c, a"); err != nil || !slices.Equal(got, []string{"c", "a"}) {
		t.Errorf(`Select("c, a") = %v, %v`, got, err)
	}
	if _, err := c.Select("a,z"); err == nil || err.Error() != `unknown letter "z" (have a, b, c)` {
		t.Errorf(`Select("a,z") error = %v`, err)
	}
	c.Hint = "letters look like a"
	if _, err := c.Select("z"); err == nil || err.Error() != `unknown letter "z" (letters look like a)` {
		t.Errorf(`Select("z") error with hint = %v`, err)
	}
}

func TestDefault(t *testing.T) {
	var a, b, c int
	Default(&a, 10, 3, false)
	Default(&b, 10, 3, true)
	c = 7
	Default(&c, 10, 3, true)
	if a != 10 || b != 3 || c != 7 {
		t.Errorf("Default: %d %d %d, want 10 3 7", a, b, c)
	}
}
