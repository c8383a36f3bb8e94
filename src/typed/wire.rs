//! The schema registry wire format, as Confluent's serializers write it
//! and every registry-aware deserializer (Confluent's, Apicurio's in its
//! Confluent-compatible mode, librdkafka-based clients') reads it:
//!
//! ```text
//! magic byte 0 | schema id, 4 bytes big-endian | [Protobuf: message indexes] | payload
//! ```
//!
//! Protobuf's message indexes name the message type within the schema's
//! file: the path of indexes from a top-level message down through nested
//! ones (`[0]` is the file's first message, `[1, 0]` the first message
//! nested in the second). They are written as a count and then each index,
//! all as zigzag varints (Kafka's `ByteUtils.writeVarint`), except the
//! commonest, `[0]`, which is written as the single byte 0.
//!
//! ```
//! use courier_kafka::typed::wire;
//! let mut out = Vec::new();
//! wire::write_header(&mut out, 1);
//! out.extend_from_slice(&[0x04, b'h', b'i']); // the Avro string "hi"
//! assert_eq!(out, [0, 0, 0, 0, 1, 4, 0x68, 0x69]);
//! assert_eq!(wire::read_header(&out), Some((1, &[4, 0x68, 0x69][..])));
//! ```

/// The first byte of every framed payload.
pub const MAGIC_BYTE: u8 = 0;

/// Appends the magic byte and `schema_id` (big-endian).
pub fn write_header(out: &mut Vec<u8>, schema_id: u32) {
    out.push(MAGIC_BYTE);
    out.extend_from_slice(&schema_id.to_be_bytes());
}

/// The schema id and what follows it, or `None` when `bytes` does not
/// start with the magic byte and four bytes of id.
pub fn read_header(bytes: &[u8]) -> Option<(u32, &[u8])> {
    match bytes {
        [MAGIC_BYTE, a, b, c, d, rest @ ..] => Some((u32::from_be_bytes([*a, *b, *c, *d]), rest)),
        _ => None,
    }
}

/// Appends `value` as a zigzag varint (Kafka's `ByteUtils.writeVarint`).
pub fn write_zigzag_varint(out: &mut Vec<u8>, value: i32) {
    let mut v = ((value << 1) ^ (value >> 31)) as u32;
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a zigzag varint of at most five bytes: the value and the rest.
pub fn read_zigzag_varint(bytes: &[u8]) -> Option<(i32, &[u8])> {
    let mut v: u32 = 0;
    for (i, b) in bytes.iter().enumerate().take(5) {
        v |= u32::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            let value = ((v >> 1) as i32) ^ -((v & 1) as i32);
            return Some((value, &bytes[i + 1..]));
        }
    }
    None
}

/// Appends Protobuf's message indexes: `[0]` (or none) as the single byte
/// 0, else their count and each index, as zigzag varints.
pub fn write_message_indexes(out: &mut Vec<u8>, indexes: &[i32]) {
    if indexes.is_empty() || indexes == [0] {
        out.push(0);
        return;
    }
    write_zigzag_varint(out, indexes.len() as i32);
    for &i in indexes {
        write_zigzag_varint(out, i);
    }
}

/// Reads Protobuf's message indexes (a count of 0 is `[0]`): the indexes
/// and the rest.
pub fn read_message_indexes(bytes: &[u8]) -> Option<(Vec<i32>, &[u8])> {
    let (count, mut rest) = read_zigzag_varint(bytes)?;
    if count == 0 {
        return Some((vec![0], rest));
    }
    if count < 0 || count as usize > rest.len() {
        return None;
    }
    let mut indexes = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let (i, r) = read_zigzag_varint(rest)?;
        indexes.push(i);
        rest = r;
    }
    Some((indexes, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_is_magic_zero_and_a_big_endian_id() {
        let mut out = Vec::new();
        write_header(&mut out, 0x0102_0304);
        assert_eq!(out, [0, 1, 2, 3, 4]);
        assert_eq!(read_header(&out), Some((0x0102_0304, &[][..])));
        assert_eq!(read_header(&[1, 0, 0, 0, 1]), None, "wrong magic byte");
        assert_eq!(read_header(&[0, 0, 0]), None, "too short");
    }

    #[test]
    fn zigzag_varints_match_kafkas_byte_utils() {
        // ByteUtils.writeVarint: 0 → 00, -1 → 01, 1 → 02, 63 → 7e,
        // -64 → 7f, 64 → 80 01, i32::MAX → fe ff ff ff 0f.
        for (v, want) in [
            (0, &[0x00][..]),
            (-1, &[0x01]),
            (1, &[0x02]),
            (2, &[0x04]),
            (63, &[0x7e]),
            (-64, &[0x7f]),
            (64, &[0x80, 0x01]),
            (i32::MAX, &[0xfe, 0xff, 0xff, 0xff, 0x0f]),
            (i32::MIN, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
        ] {
            let mut out = Vec::new();
            write_zigzag_varint(&mut out, v);
            assert_eq!(out, want, "{v}");
            assert_eq!(read_zigzag_varint(&out), Some((v, &[][..])), "{v}");
        }
        assert_eq!(read_zigzag_varint(&[0x80, 0x80]), None, "unterminated");
    }

    #[test]
    fn message_indexes_as_confluent_writes_them() {
        let enc = |ix: &[i32]| {
            let mut out = Vec::new();
            write_message_indexes(&mut out, ix);
            out
        };
        // The first message: the one-byte shortcut.
        assert_eq!(enc(&[0]), [0x00]);
        // The second top-level message: count 1, index 1.
        assert_eq!(enc(&[1]), [0x02, 0x02]);
        // The first message nested in the third: count 2, then 2 and 0.
        assert_eq!(enc(&[2, 0]), [0x04, 0x04, 0x00]);
        // Index 64 takes two bytes.
        assert_eq!(enc(&[64]), [0x02, 0x80, 0x01]);
        for ix in [&[0][..], &[1], &[2, 0], &[64], &[3, 1, 4]] {
            let mut bytes = enc(ix);
            bytes.push(0xaa);
            assert_eq!(
                read_message_indexes(&bytes),
                Some((ix.to_vec(), &[0xaa][..]))
            );
        }
    }

    #[test]
    fn the_avro_string_hi_with_id_1() {
        let mut out = Vec::new();
        write_header(&mut out, 1);
        // Avro: a string is its length as a zigzag varint, then UTF-8.
        write_zigzag_varint(&mut out, 2);
        out.extend_from_slice(b"hi");
        assert_eq!(out, [0x00, 0x00, 0x00, 0x00, 0x01, 0x04, 0x68, 0x69]);
    }
}
