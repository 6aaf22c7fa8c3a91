package mmvwrite

// What the external tests need of the writer's internals.

// ValueSlot is one value entry of a Writer.
type ValueSlot struct {
	Handle
	Off  uint64 // the value entry's offset in the file
	Type MetricType
}

// ValueSlots returns every value entry of w.
func ValueSlots(w *Writer) []ValueSlot {
	var s []ValueSlot
	for _, h := range w.slots {
		s = append(s, ValueSlot{h, h.off, h.typ})
	}
	return s
}

// SetRaw stores the value entry's raw fields.
func (h Handle) SetRaw(v uint64, extra int64) { h.setRaw(v, extra) }

// Mapped returns the mapped file of w.
func Mapped(w *Writer) []byte { return w.data }
