package forward

import "encoding/binary"

func putU16(b []byte, v uint16) { binary.NativeEndian.PutUint16(b, v) }
func putU32(b []byte, v uint32) { binary.NativeEndian.PutUint32(b, v) }

func getU16(b []byte) uint16 { return binary.NativeEndian.Uint16(b) }
