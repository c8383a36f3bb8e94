//! Zig-zag variable-length integers, as the record format uses them.
//!
//! These write into a `Vec<u8>` that already has room (the batch builder
//! sizes every record before it writes it), so the fast path is a push per
//! byte with no bounds re-checks beyond `Vec`'s own.
//!
//! # References
//! - <https://kafka.apache.org/documentation/#record> ("varint" and "varlong",
//!   zig-zag encoded as in protocol buffers)

/// Bytes needed for `v` as a zig-zag varint (int32).
#[inline]
pub fn varint_len(v: i32) -> usize {
    uvarint_len(zigzag32(v) as u64)
}

/// Bytes needed for `v` as a zig-zag varlong (int64).
#[inline]
pub fn varlong_len(v: i64) -> usize {
    uvarint_len(zigzag64(v))
}

#[inline]
fn uvarint_len(v: u64) -> usize {
    // 1 byte per 7 bits, at least 1: ceil(bits / 7), which for bits in
    // 1..=64 is (bits * 9 + 64) / 64 (a multiply and a shift, no divide;
    // checked for every bit count in the tests).
    let bits = 64 - (v | 1).leading_zeros() as usize;
    (bits * 9 + 64) / 64
}

/// Zig-zag encoding of an int32 (small magnitudes, small codes).
#[inline]
pub(crate) fn zigzag32(v: i32) -> u32 {
    ((v << 1) ^ (v >> 31)) as u32
}

/// Zig-zag encoding of an int64.
#[inline]
pub(crate) fn zigzag64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Appends `v` as a zig-zag varint.
#[inline]
pub fn put_varint(buf: &mut Vec<u8>, v: i32) {
    put_uvarint(buf, zigzag32(v) as u64)
}

/// Appends `v` as a zig-zag varlong (the tests' encoder of timestamp
/// deltas; the batch builder writes its own).
#[cfg(test)]
pub fn put_varlong(buf: &mut Vec<u8>, v: i64) {
    put_uvarint(buf, zigzag64(v))
}

#[inline]
fn put_uvarint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Reads a zig-zag varint off the front of `buf`, advancing it; `None` when
/// the bytes end first or the value does not fit in 32 bits.
pub fn get_varint(buf: &mut &[u8]) -> Option<i32> {
    let u = get_uvarint(buf, 5)?;
    let u = u32::try_from(u).ok()?;
    Some(((u >> 1) as i32) ^ -((u & 1) as i32))
}

/// Reads a zig-zag varlong off the front of `buf`, advancing it.
pub fn get_varlong(buf: &mut &[u8]) -> Option<i64> {
    let u = get_uvarint(buf, 10)?;
    Some(((u >> 1) as i64) ^ -((u & 1) as i64))
}

fn get_uvarint(buf: &mut &[u8], max_bytes: usize) -> Option<u64> {
    let mut v: u64 = 0;
    for i in 0..max_bytes {
        let (&b, rest) = buf.split_first()?;
        *buf = rest;
        v |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode(mut b: &[u8]) -> i64 {
        let mut shift = 0;
        let mut u: u64 = 0;
        loop {
            let byte = b[0];
            b = &b[1..];
            u |= ((byte & 0x7f) as u64) << shift;
            shift += 7;
            if byte & 0x80 == 0 {
                break;
            }
        }
        ((u >> 1) as i64) ^ -((u & 1) as i64)
    }

    #[test]
    fn uvarint_len_is_ceil_of_bits_over_seven() {
        for bits in 1..=64u32 {
            let v = if bits == 64 {
                u64::MAX
            } else {
                (1u64 << bits) - 1
            };
            assert_eq!(uvarint_len(v), (bits as usize).div_ceil(7), "{bits} bits");
            let mut b = Vec::new();
            put_uvarint(&mut b, v);
            assert_eq!(b.len(), uvarint_len(v), "{bits} bits");
        }
    }

    #[test]
    fn known_encodings() {
        let cases: &[(i64, &[u8])] = &[
            (0, &[0]),
            (-1, &[1]),
            (1, &[2]),
            (-64, &[0x7f]),
            (64, &[0x80, 0x01]),
        ];
        for (v, want) in cases {
            let mut b = Vec::new();
            put_varlong(&mut b, *v);
            assert_eq!(&b, want, "{v}");
        }
    }

    proptest! {
        #[test]
        fn varlong_round_trips_and_len_is_exact(v: i64) {
            let mut b = Vec::new();
            put_varlong(&mut b, v);
            prop_assert_eq!(b.len(), varlong_len(v));
            prop_assert_eq!(decode(&b), v);
        }

        #[test]
        fn varint_round_trips_and_len_is_exact(v: i32) {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            prop_assert_eq!(b.len(), varint_len(v));
            prop_assert_eq!(decode(&b), v as i64);
        }
    }
}
