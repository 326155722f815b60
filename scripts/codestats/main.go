// Command codestats measures the structure of Go packages, for closing notes
// that compare a change with what came before: function length and complexity,
// methods per type, the largest reference cycle among a package's files, wait
// loops, and payload literals.
//
//	go run ./scripts/codestats rlock pubsub watchdog lua
//
// It reads source files as they are (tests excluded) and prints one block per
// package. The measures are simple and stated with each figure:
//
//   - lines: a function's lines, from func to its closing brace;
//   - complexity: 1 + if, for, case, comm clause, && and ||, as gocyclo counts;
//   - methods: methods per receiver type;
//   - file cycle: files as nodes, an edge from A to B when A uses a name that B
//     declares (resolved by go/types); the size of the largest strongly
//     connected set (CODESTATS_EDGES=1 prints every edge with its names);
//   - wait loops: functions with a for loop whose body has a select with a
//     case on ctx.Done() (a hand-written wait);
//   - payload literals: string literals "0" and "1", and comparisons of a
//     .Payload field, outside tests.
package main

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"iter"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: codestats DIR...")
		os.Exit(2)
	}
	for _, dir := range os.Args[1:] {
		if err := report(dir); err != nil {
			fmt.Fprintf(os.Stderr, "codestats: %s: %v\n", dir, err)
			os.Exit(1)
		}
	}
}

// pkg is one package's parsed files.
type pkg struct {
	path  string // import path, for the type checker
	fset  *token.FileSet
	files map[string]*ast.File // by base name
}

func load(dir string) (*pkg, error) {
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	p := &pkg{path: dir, fset: fset, files: map[string]*ast.File{}}
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			return nil, err
		}
		p.files[filepath.Base(n)] = f
	}
	return p, nil
}

func report(dir string) error {
	p, err := load(dir)
	if err != nil {
		return err
	}
	fmt.Printf("== %s (%d files)\n", dir, len(p.files))
	funcs := p.funcs()
	sort.Slice(funcs, func(i, j int) bool { return funcs[i].lines > funcs[j].lines })
	var total, cx int
	for _, f := range funcs {
		total += f.lines
		cx += f.complexity
	}
	if len(funcs) > 0 {
		fmt.Printf("functions: %d, mean %.1f lines, mean complexity %.1f\n",
			len(funcs), float64(total)/float64(len(funcs)), float64(cx)/float64(len(funcs)))
		fmt.Printf("longest: %s (%d lines)\n", funcs[0].name, funcs[0].lines)
		sort.Slice(funcs, func(i, j int) bool { return funcs[i].complexity > funcs[j].complexity })
		fmt.Printf("highest complexity: %s (%d)\n", funcs[0].name, funcs[0].complexity)
	}
	for _, m := range p.methodCounts() {
		fmt.Printf("methods of %s: %d\n", m.recv, m.n)
	}
	size, members := p.largestFileCycle()
	fmt.Printf("largest file cycle: %d of %d files %v\n", size, len(p.files), members)
	fmt.Printf("wait loops: %d %v\n", len(p.waitLoops()), p.waitLoops())
	fmt.Printf("payload literals: %d\n", p.payloadLiterals())
	return nil
}

type fn struct {
	name              string
	lines, complexity int
}

func (p *pkg) funcs() []fn {
	var out []fn
	for fname, fd := range p.bodies() {
		lines := p.fset.Position(fd.End()).Line - p.fset.Position(fd.Pos()).Line + 1
		out = append(out, fn{name: fname + ":" + funcName(fd), lines: lines, complexity: complexity(fd)})
	}
	return out
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	return "(" + recvType(fd.Recv.List[0].Type) + ")." + fd.Name.Name
}

func recvType(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return "*" + recvType(t.X)
	case *ast.Ident:
		return t.Name
	case *ast.IndexExpr:
		return recvType(t.X)
	}
	return "?"
}

func complexity(fd *ast.FuncDecl) int {
	c := 1
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			c++
		case *ast.CaseClause:
			if n.List != nil {
				c++
			}
		case *ast.CommClause:
			if n.Comm != nil {
				c++
			}
		case *ast.BinaryExpr:
			if n.Op == token.LAND || n.Op == token.LOR {
				c++
			}
		}
		return true
	})
	return c
}

type methodCount struct {
	recv string
	n    int
}

func (p *pkg) methodCounts() []methodCount {
	counts := map[string]int{}
	for _, f := range p.files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil && len(fd.Recv.List) > 0 {
				counts[strings.TrimPrefix(recvType(fd.Recv.List[0].Type), "*")]++
			}
		}
	}
	var out []methodCount
	for r, n := range counts {
		if n >= 10 {
			out = append(out, methodCount{r, n})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].n > out[j].n })
	return out
}

// largestFileCycle returns the size and members of the largest set of files
// that reach each other: an edge from A to B when A uses a name (a function,
// type, variable, constant, field or method) declared in B, resolved by the
// type checker.
func (p *pkg) largestFileCycle() (int, []string) {
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	files := make([]*ast.File, 0, len(p.files))
	for _, f := range p.files {
		files = append(files, f)
	}
	conf := types.Config{Importer: importer.ForCompiler(p.fset, "source", nil), Error: func(error) {}}
	tp, _ := conf.Check(p.path, p.fset, files, info)
	edges := map[string]map[string]bool{}
	why := map[[2]string]map[string]bool{} // the names behind each edge
	fileOf := func(pos token.Pos) string { return filepath.Base(p.fset.Position(pos).Filename) }
	for id, obj := range info.Uses {
		if obj == nil || obj.Pkg() != tp || !obj.Pos().IsValid() {
			continue
		}
		if _, local := obj.(*types.Var); local && obj.Parent() != nil && obj.Parent() != tp.Scope() {
			continue // a local variable or parameter
		}
		from, to := fileOf(id.Pos()), fileOf(obj.Pos())
		if from == to {
			continue
		}
		if edges[from] == nil {
			edges[from] = map[string]bool{}
		}
		edges[from][to] = true
		if why[[2]string{from, to}] == nil {
			why[[2]string{from, to}] = map[string]bool{}
		}
		why[[2]string{from, to}][obj.Name()] = true
	}
	if os.Getenv("CODESTATS_EDGES") != "" { // the graph, for finding what closes a cycle
		var lines []string
		for e, names := range why {
			var ns []string
			for n := range names {
				ns = append(ns, n)
			}
			sort.Strings(ns)
			lines = append(lines, fmt.Sprintf("edge %s -> %s: %s", e[0], e[1], strings.Join(ns, " ")))
		}
		sort.Strings(lines)
		fmt.Println(strings.Join(lines, "\n"))
	}
	return largestSCC(edges)
}

// largestSCC is Tarjan's algorithm over the file graph.
func largestSCC(edges map[string]map[string]bool) (int, []string) {
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var best []string
	i := 0
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = i, i
		i++
		stack = append(stack, v)
		onStack[v] = true
		for w := range edges[v] {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var comp []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp = append(comp, w)
				if w == v {
					break
				}
			}
			if len(comp) > len(best) {
				best = comp
			}
		}
	}
	names := make([]string, 0, len(edges))
	for v := range edges {
		names = append(names, v)
	}
	sort.Strings(names)
	for _, v := range names {
		if _, seen := index[v]; !seen {
			visit(v)
		}
	}
	sort.Strings(best)
	if len(best) < 2 {
		return 0, nil
	}
	return len(best), best
}

// waitLoops returns the functions with a for loop whose body selects on
// ctx.Done().
func (p *pkg) waitLoops() []string {
	var out []string
	for fname, fd := range p.bodies() {
		found := false
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if loop, ok := n.(*ast.ForStmt); ok && selectsOnDone(loop.Body) {
				found = true
			}
			return !found
		})
		if found {
			out = append(out, fname+":"+funcName(fd))
		}
	}
	sort.Strings(out)
	return out
}

// bodies yields the functions with a body, with the name of their file.
func (p *pkg) bodies() iter.Seq2[string, *ast.FuncDecl] {
	return func(yield func(string, *ast.FuncDecl) bool) {
		for fname, f := range p.files {
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil && !yield(fname, fd) {
					return
				}
			}
		}
	}
}

func selectsOnDone(body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectStmt)
		if !ok {
			return !found
		}
		for _, c := range sel.Body.List {
			cc := c.(*ast.CommClause)
			if cc.Comm != nil && strings.Contains(exprString(cc.Comm), ".Done()") {
				found = true
			}
		}
		return !found
	})
	return found
}

func exprString(n ast.Node) string {
	var b strings.Builder
	ast.Inspect(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if n.Sel.Name == "Done" {
				b.WriteString(".Done()")
			}
		}
		return true
	})
	return b.String()
}

func (p *pkg) payloadLiterals() int {
	n := 0
	for _, f := range p.files {
		ast.Inspect(f, func(node ast.Node) bool {
			switch x := node.(type) {
			case *ast.BasicLit:
				if x.Kind == token.STRING && (x.Value == `"0"` || x.Value == `"1"`) {
					n++
				}
			case *ast.SelectorExpr:
				if x.Sel.Name == "Payload" {
					n++
				}
			}
			return true
		})
	}
	return n
}
