package render

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"

	"nanohost/internal/browsertest"
	"nanohost/internal/pipeline"
)

// Graphviz sizes nodes and places labels by its own estimate of Helvetica's
// widths; a browser draws them in a real font. In Chromium every node's
// text fits inside its outline and no edge label covers a node, for the
// bundled circuit and the crowded and many-shaped samples. Screenshots of
// each are kept ($NANOHOST_ARTIFACTS/render, else a temporary directory
// named in the log).
func TestSVGAsABrowserDrawsIt(t *testing.T) {
	ctx := browsertest.New(t, browsertest.FindChromium(t))
	shots := browsertest.ArtifactDir(t, "render")
	page := filepath.Join(t.TempDir(), "graph.html")
	for name, g := range map[string]*pipeline.Graph{"investigation-circuit": circuit(t), "crowded": parse(t, crowded), "shapes-lr": parse(t, sample)} {
		html := `<!doctype html><html><head><meta charset="utf-8"></head><body style="margin:0;background:#fff">` + string(mustSVG(t, g, Look{})) + `</body></html>`
		if err := os.WriteFile(page, []byte(html), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(ctx, chromedp.Navigate("file://"+page), chromedp.WaitVisible(chromedp.CSS(`svg g.node`))); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		problems, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](drawnProblemsJS))
		if err != nil {
			t.Fatalf("%s: measure: %v", name, err)
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("%s: screenshot: %v", name, err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s", name, p)
		}
		path := filepath.Join(shots, name+".png")
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", path)
	}
}

// drawnProblemsJS lists, from the browser's own measurements, node texts
// wider than their node's outline and edge labels over a node.
const drawnProblemsJS = `(() => {
  const out = [];
  const nodes = [...document.querySelectorAll('g.node')].map(g => ({g, b: g.querySelector('polygon, ellipse, path').getBBox()}));
  for (const {g, b} of nodes) {
    for (const t of g.querySelectorAll('text')) {
      const tb = t.getBBox();
      if (tb.x < b.x - 0.5 || tb.x + tb.width > b.x + b.width + 0.5) {
        out.push(g.id + ': "' + t.textContent + '" is ' + tb.width.toFixed(1) + ' wide in a ' + b.width.toFixed(1) + ' wide outline');
      }
    }
  }
  for (const t of document.querySelectorAll('g.edge text')) {
    const tb = t.getBBox();
    for (const {g, b} of nodes) {
      if (tb.x < b.x + b.width && b.x < tb.x + tb.width && tb.y < b.y + b.height && b.y < tb.y + tb.height) {
        out.push('edge label "' + t.textContent + '" covers ' + g.id);
      }
    }
  }
  return out;
})()`
