package sigv4_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSignaturesComparedInConstantTime reads this package's source: a
// signature (the request's, a chunk's, the trailer's) is compared only
// with hmac.Equal, never with ==, !=, bytes.Equal or the strings
// functions, which return at the first byte that differs and so tell a
// client, by how long the answer takes, how much of a forged signature
// was right. Checks for emptiness (signature == "") are not comparisons
// with a secret and are allowed. A timing measurement would be noisy on
// shared cores; the source is what decides.
func TestSignaturesComparedInConstantTime(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	hmacEquals := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BinaryExpr:
				if n.Op != token.EQL && n.Op != token.NEQ {
					return true
				}
				if isEmptyString(n.X) || isEmptyString(n.Y) {
					return true
				}
				if mentionsSignature(n.X) || mentionsSignature(n.Y) {
					t.Errorf("%s: a signature compared with %s; use hmac.Equal", fset.Position(n.Pos()), n.Op)
				}
			case *ast.CallExpr:
				fn := callName(n)
				switch fn {
				case "hmac.Equal":
					hmacEquals++
					if len(n.Args) != 2 || !(mentionsSignature(n.Args[0]) || mentionsSignature(n.Args[1])) {
						t.Errorf("%s: hmac.Equal of something that names no signature", fset.Position(n.Pos()))
					}
				case "bytes.Equal", "bytes.Compare", "strings.Compare", "strings.EqualFold", "reflect.DeepEqual", "slices.Equal":
					for _, a := range n.Args {
						if mentionsSignature(a) {
							t.Errorf("%s: a signature compared with %s; use hmac.Equal", fset.Position(n.Pos()), fn)
						}
					}
				}
			}
			return true
		})
	}
	// The request's signature, each chunk's and the trailer's.
	if hmacEquals < 3 {
		t.Errorf("%d hmac.Equal calls; want one for each of the request, chunk and trailer signatures", hmacEquals)
	}
}

// mentionsSignature reports whether e names a signature: an identifier
// or field whose name holds "sig" (signature, chunkWantSig, sig, ...),
// but not "signed" (the list of signed headers is no secret), or the
// expected signature.
func mentionsSignature(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok {
			name := strings.ToLower(id.Name)
			if (strings.Contains(name, "sig") && !strings.Contains(name, "signed")) || name == "expected" {
				found = true
			}
		}
		return !found
	})
	return found
}

func isEmptyString(e ast.Expr) bool {
	lit, ok := e.(*ast.BasicLit)
	return ok && lit.Kind == token.STRING && (lit.Value == `""` || lit.Value == "``")
}

// callName is "pkg.Func" for a call of a package's function, else "".
func callName(c *ast.CallExpr) string {
	sel, ok := c.Fun.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	pkg, ok := sel.X.(*ast.Ident)
	if !ok {
		return ""
	}
	return pkg.Name + "." + sel.Sel.Name
}
