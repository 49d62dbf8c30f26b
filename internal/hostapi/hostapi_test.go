package hostapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// fill sets every exported field of v (recursively) to a non-zero value,
// so that a field that does not survive JSON shows up as a difference.
func fill(t *testing.T, v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Date(2026, 11, 23, 23, 0, *n, 0, time.UTC)))
			return
		}
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i), n)
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), n)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		fill(t, v.Index(0), n)
		fill(t, v.Index(1), n)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(t, k, n)
		fill(t, e, n)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", *n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Uint64:
		v.SetUint(uint64(*n))
	default:
		t.Fatalf("fill: no value for a %s (%s): extend the test", v.Kind(), v.Type())
	}
}

// Every request and response of the host contract is a plain struct
// that survives a JSON round trip whole: the contract can be served to
// another host over the network without losing a field.
func TestContractTypesRoundTripJSON(t *testing.T) {
	for _, v := range []any{
		&MachineSpec{}, &SnapshotRef{}, &VolumeAttachment{}, &Machine{},
		&ForkRequest{}, &DeadlineRequest{}, &SnapshotRequest{}, &SnapshotInfo{},
		&KillRequest{}, &VolumeSpec{}, &Inventory{}, &SettleRequest{}, &Event{},
	} {
		name := reflect.TypeOf(v).Elem().Name()
		t.Run(name, func(t *testing.T) {
			n := 0
			fill(t, reflect.ValueOf(v).Elem(), &n)
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			back := reflect.New(reflect.TypeOf(v).Elem()).Interface()
			if err := json.Unmarshal(b, back); err != nil {
				t.Fatalf("unmarshal: %v", err)
			}
			if !reflect.DeepEqual(v, back) {
				t.Fatalf("%s changed in a JSON round trip:\n sent %+v\n  got %+v\n json %s", name, v, back, b)
			}
		})
	}
}

// The host's "no such machine" survives as its code; in process it is
// also recognisable with errors.Is.
func TestUnknownMachine(t *testing.T) {
	err := Unknown("sbx_1")
	if !errors.Is(err, ErrUnknownMachine) {
		t.Fatalf("Unknown does not wrap ErrUnknownMachine: %v", err)
	}
}
