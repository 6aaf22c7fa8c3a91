package bridge

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pcp-exporter/pcp-exporter/derive"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// TestReconfigureAll: a reload gives the collector and the OTLP producer
// other derived metrics over the same source; a rewrap that fails for one
// of them changes neither.
func TestReconfigureAll(t *testing.T) {
	ds, _ := derivedOverMMV(t)
	col := New(mapper(t, mapping.NamingDefault), nil, Source{Name: "mmv", Src: ds})
	prod := NewOTelProducer(mapper(t, mapping.NamingDefault), nil, Source{Name: "mmv", Src: ds})
	thrice := func(s source.Source) (source.Source, error) {
		e, err := derive.Parse("3 * mmv.a.value")
		if err != nil {
			return nil, err
		}
		w, err := derive.Wrap(s.(*derive.Source).Unwrap(), []derive.Definition{{Name: "thrice", Expr: e}}, nil)
		if err == nil {
			t.Cleanup(func() { w.Close() })
		}
		return w, err
	}
	if err := ReconfigureAll(mapper(t, mapping.NamingDefault), thrice, col, prod); err != nil {
		t.Fatal(err)
	}
	out := string(exposition(t, col))
	if !strings.Contains(out, "\nthrice_total 3000") || strings.Contains(out, "twice") {
		t.Fatalf("after the reload, want thrice and no twice:\n%s", out)
	}
	if d, ok := prod.Sources()[0].(*derive.Source); !ok || d == ds {
		t.Fatalf("the producer kept its old reader")
	}
	before, prodBefore := col.Sources()[0], prod.Sources()[0]
	calls := 0
	failSecond := func(s source.Source) (source.Source, error) {
		if calls++; calls == 2 {
			return nil, errors.New("bad definition")
		}
		return thrice(s)
	}
	if err := ReconfigureAll(mapper(t, mapping.NamingPmproxy), failSecond, col, prod); err == nil {
		t.Fatal("a failed rewrap was not reported")
	}
	if col.Sources()[0] != before || prod.Sources()[0] != prodBefore {
		t.Error("a failed reload changed a reader")
	}
	if col.mapper.Naming() != mapping.NamingDefault {
		t.Error("a failed reload changed the mapper")
	}
}

// TestReloadReachesThePush: the OTLP push reads through the collector, so
// the reload of the collector alone (one swap) gives the push the new
// derived metrics and the new naming.
func TestReloadReachesThePush(t *testing.T) {
	ds, _ := derivedOverMMV(t)
	col := New(mapper(t, mapping.NamingDefault), nil, Source{Name: "mmv", Src: ds})
	prod := col.OTel()
	e, err := derive.Parse("3 * mmv.a.value")
	if err != nil {
		t.Fatal(err)
	}
	thrice := func(s source.Source) (source.Source, error) {
		w, err := derive.Wrap(s.(*derive.Source).Unwrap(), []derive.Definition{{Name: "thrice", Expr: e}}, nil)
		if err == nil {
			t.Cleanup(func() { w.Close() })
		}
		return w, err
	}
	if err := ReconfigureAll(mapper(t, mapping.NamingPmproxy), thrice, col); err != nil {
		t.Fatal(err)
	}
	if prod.Sources()[0] != col.Sources()[0] {
		t.Fatal("the push reads another reader than the scrape")
	}
	sm, err := prod.Produce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, m := range sm[0].Metrics {
		got[m.Name] = true
	}
	if !got["thrice"] || got["twice"] {
		t.Errorf("after the reload the push has %v, want thrice and no twice", got)
	}
	if out := string(exposition(t, col)); !strings.Contains(out, "\nthrice 3000") {
		t.Errorf("after the reload the scrape (pmproxy naming) lacks thrice 3000:\n%s", out)
	}
}
