package nwb

// AppendUvarint appends v as a minimal unsigned LEB128 varint (nwb.md §4).
func AppendUvarint(dst []byte, v uint64) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

// UvarintLen is the number of bytes AppendUvarint writes for v.
func UvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// ReadUvarint reads a minimal varint from b at *pos and advances *pos. It
// refuses non-minimal encodings (OverlongVarint), more than 64 bits
// (VarintOverflow) and input that ends inside the varint (Truncated).
func ReadUvarint(b []byte, pos *int) (uint64, error) {
	var v uint64
	p := *pos
	for i := 0; i < 10; i++ {
		if p >= len(b) {
			return 0, Err(Truncated)
		}
		c := b[p]
		p++
		if i == 9 && c > 1 {
			return 0, Err(VarintOverflow)
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			if c == 0 && i > 0 {
				return 0, Err(OverlongVarint)
			}
			*pos = p
			return v, nil
		}
	}
	return 0, Err(VarintOverflow)
}

// readLen reads a varint length and checks it against the bytes left in b
// after it and against max (tooLarge when above).
func readLen(b []byte, pos *int, max int, tooLarge Kind) (int, error) {
	v, err := ReadUvarint(b, pos)
	if err != nil {
		return 0, err
	}
	if v > uint64(max) {
		return 0, Err(tooLarge)
	}
	if v > uint64(len(b)-*pos) {
		return 0, Err(Truncated)
	}
	return int(v), nil
}
