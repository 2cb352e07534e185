package chaos

// Tests of the report's timeline as a browser draws it (headless Chromium).

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/testutil"
)

// requireChromiumEnv turns a missing chromium from a skipped test into a failed one.
const requireChromiumEnv = "REDLOCK_REQUIRE_CHROMIUM"

// screenshot renders an HTML file in headless Chromium (Debian's chromium package) at
// width × height CSS pixels, one device pixel each, and returns the image.
func screenshot(t *testing.T, page string, width, height int) image.Image {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		testutil.SkipOrFail(t, requireChromiumEnv, "chromium not found on PATH", "headless Chromium for a screenshot", "apt-get install -y chromium")
	}
	dir := t.TempDir()
	shot := filepath.Join(dir, "shot.png")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--force-device-scale-factor=1", "--user-data-dir="+filepath.Join(dir, "profile"),
		fmt.Sprintf("--window-size=%d,%d", width, height), "--screenshot="+shot, "file://"+page)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out.String())
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v\n%s", err, out.String())
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != width || b.Dy() != height {
		t.Fatalf("screenshot is %dx%d, want %dx%d", b.Dx(), b.Dy(), width, height)
	}
	return img
}

// TestTimelineScreenshot renders the synthetic run's timeline in headless Chromium and
// looks at the pixels where the history says the marks are: the overlap band is red, the
// rejected write's ring is red, the critical sections have their client's colour, the
// page around them is white.
func TestTimelineScreenshot(t *testing.T) {
	res := syntheticResult()
	svg := timeline(res)
	root, _ := parseSVG(t, svg)
	width := svgWidth
	height, err := strconv.Atoi(root.attrs["height"])
	if err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(t.TempDir(), "timeline.html")
	html := `<!DOCTYPE html><html><head><meta charset="utf-8"><style>body{margin:0} svg{display:block;font:11px sans-serif}</style></head><body>` + svg + `</body></html>`
	if err := os.WriteFile(page, []byte(html), 0o644); err != nil {
		t.Fatal(err)
	}
	img := screenshot(t, page, width, height)

	h := res.History
	x0, plotW := root.num(t, "data-x0"), root.num(t, "data-plot-width")
	x := func(d time.Duration) int { return int(x0 + plotW*float64(d)/float64(h.Duration)) }
	rowY := func(row int) int { return svgTop + (1+row)*svgRowH + svgRowH/2 } // row 0 is the first node row
	clientRow := func(c int) int { return h.Nodes + c }

	type rgb struct{ r, g, b int }
	at := func(px, py int) rgb {
		r, g, b, _ := img.At(px, py).RGBA()
		return rgb{int(r >> 8), int(g >> 8), int(b >> 8)}
	}
	reddish := func(c rgb) bool { return c.r > c.g+30 && c.r > c.b+30 }
	check := func(what string, px, py int, ok func(rgb) bool) {
		t.Helper()
		if c := at(px, py); !ok(c) {
			t.Errorf("%s: pixel (%d,%d) is %v", what, px, py, c)
		}
	}

	o := res.Verdict.Overlaps[0]
	check("overlap band, in a gap of client 1's row", x(o.From+(o.To-o.From)/2), rowY(clientRow(1))-svgRowH/2+1, reddish)
	for _, w := range h.Writes {
		if w.Applied >= 0 && !w.Accepted && !w.Delayed {
			check(fmt.Sprintf("ring of rejected write %d", w.ID), x(w.Applied)+7, rowY(clientRow(w.Client)), reddish)
		}
	}
	blue := func(c rgb) bool { return c.b > c.r+60 && c.b > 120 } // client 0: #1f77b4
	check("client 0's section before the pause", x(200*time.Millisecond), rowY(clientRow(0)), blue)
	check("node 0 holding client 0's key", x(600*time.Millisecond), rowY(0), blue)
	white := func(c rgb) bool { return c.r > 240 && c.g > 240 && c.b > 240 }
	check("background", 5, height-3, white)
}
