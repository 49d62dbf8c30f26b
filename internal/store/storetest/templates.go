package storetest

import (
	"testing"
	"time"

	"github.com/pandastack/pandastack"
)

func template(name string) pandastack.Template {
	return pandastack.Template{
		Name:      name,
		ID:        "tpl_" + name + "_1",
		CPUs:      2,
		MemoryMiB: 1024,
		DiskMiB:   4096,
		Accel:     pandastack.AccelKVM,
		Dir:       "/var/lib/pandastack/templates/" + name,
		BuiltAt:   at(30),
		BuildMs:   12345,
	}
}

func (h *harness) templates(t *testing.T) {
	t.Run("RoundTrip", func(t *testing.T) {
		s := h.newStore(t)
		py := template("python")
		tcg := template("node")
		tcg.Accel, tcg.BuildMs, tcg.BuiltAt = pandastack.AccelTCG, 0, time.Time{}
		for _, tpl := range []pandastack.Template{py, tcg} {
			mustNot(t, s.PutTemplate(t.Context(), tpl), "put template "+tpl.Name)
		}
		for _, want := range []pandastack.Template{py, tcg} {
			got, err := s.GetTemplate(t.Context(), want.Name)
			mustNot(t, err, "get template "+want.Name)
			checkTemplate(t, got, want)
		}
	})

	t.Run("NotFound", func(t *testing.T) {
		s := h.newStore(t)
		_, err := s.GetTemplate(t.Context(), "python")
		wantCode(t, err, pandastack.ENotFound, "GetTemplate on empty store")
		mustNot(t, s.PutTemplate(t.Context(), template("python")), "put template")
		// The key is the name, not the build id.
		_, err = s.GetTemplate(t.Context(), "tpl_python_1")
		wantCode(t, err, pandastack.ENotFound, "GetTemplate(build id)")
		_, err = s.GetTemplate(t.Context(), "py")
		wantCode(t, err, pandastack.ENotFound, "GetTemplate(prefix)")
	})

	t.Run("Upsert", func(t *testing.T) {
		s := h.newStore(t)
		mustNot(t, s.PutTemplate(t.Context(), template("python")), "put template")
		rebuilt := pandastack.Template{
			Name:      "python",
			ID:        "tpl_python_2",
			CPUs:      4,
			MemoryMiB: 2048,
			DiskMiB:   8192,
			Accel:     pandastack.AccelTCG,
			Dir:       "/elsewhere",
			BuiltAt:   at(90),
			BuildMs:   999,
		}
		mustNot(t, s.PutTemplate(t.Context(), rebuilt), "put template again")
		got, err := s.GetTemplate(t.Context(), "python")
		mustNot(t, err, "get template")
		checkTemplate(t, got, rebuilt)

		all, err := s.ListTemplates(t.Context())
		mustNot(t, err, "list templates")
		if len(all) != 1 {
			t.Fatalf("ListTemplates after two puts of one name returned %d templates, want 1", len(all))
		}
		checkTemplate(t, all[0], rebuilt)
	})

	t.Run("List", func(t *testing.T) {
		s := h.newStore(t)
		all, err := s.ListTemplates(t.Context())
		mustNot(t, err, "list templates")
		if all == nil || len(all) != 0 {
			t.Errorf("ListTemplates on empty store = %#v, want an empty non-nil slice", all)
		}

		// Ordered by name, whatever the insertion order.
		want := []pandastack.Template{template("base"), template("node"), template("python")}
		for _, i := range []int{2, 0, 1} {
			mustNot(t, s.PutTemplate(t.Context(), want[i]), "put template")
		}
		all, err = s.ListTemplates(t.Context())
		mustNot(t, err, "list templates")
		if len(all) != len(want) {
			t.Fatalf("ListTemplates returned %d templates, want %d", len(all), len(want))
		}
		for i := range want {
			checkTemplate(t, all[i], want[i])
		}
	})

	t.Run("EmptyKey", func(t *testing.T) {
		s := h.newStore(t)
		wantCode(t, s.PutTemplate(t.Context(), template("")), pandastack.EInvalid, "empty template name")
	})
}
