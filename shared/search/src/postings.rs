//! A word's postings as a merged segment stores them (`knowledge_segment_terms.postings`).
//!
//! One byte of format version (1), then each posting in (document, ordinal)
//! order as five unsigned LEB128 varints: the document number's increase over
//! the previous posting's (0: the same document), the ordinal (its increase
//! within the same document), the word's occurrences, those in the title, and
//! the passage's length in words. A posting of a small passage takes 5 to 8
//! bytes.

/// One passage holding a word, with what BM25F needs of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Posting {
    /// The document (an indexed revision) by number.
    pub document: i64,
    pub ordinal: i32,
    /// The word's occurrences in the passage (the title's included)...
    pub count: i16,
    /// ... and in the revision's title (weight `A`).
    pub title_count: i16,
    /// The passage's length in words.
    pub length: i32,
}

const VERSION: u8 = 1;

/// Encodes `postings`, which must be sorted by (document, ordinal) without
/// duplicates.
pub fn encode(postings: &[Posting]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + postings.len() * 6);
    out.push(VERSION);
    let (mut document, mut ordinal) = (0i64, 0i32);
    for (i, p) in postings.iter().enumerate() {
        debug_assert!(i == 0 || (p.document, p.ordinal) > (document, ordinal), "postings out of order");
        let same = i > 0 && p.document == document;
        varint(&mut out, (p.document - if i == 0 { 0 } else { document }) as u64);
        varint(&mut out, (p.ordinal - if same { ordinal } else { 0 }) as u64);
        varint(&mut out, p.count as u64);
        varint(&mut out, p.title_count as u64);
        varint(&mut out, p.length as u64);
        (document, ordinal) = (p.document, p.ordinal);
    }
    out
}

/// Decodes what [`encode`] wrote, calling `each` for every posting in order;
/// `None` when the bytes are not such an encoding.
pub fn decode(bytes: &[u8], mut each: impl FnMut(Posting)) -> Option<()> {
    let (&version, mut rest) = bytes.split_first()?;
    if version != VERSION {
        return None;
    }
    let (mut document, mut ordinal) = (0i64, 0i32);
    let mut first = true;
    while !rest.is_empty() {
        let step = read(&mut rest)?;
        let within = read(&mut rest)?;
        let count = i16::try_from(read(&mut rest)?).ok()?;
        let title_count = i16::try_from(read(&mut rest)?).ok()?;
        let length = i32::try_from(read(&mut rest)?).ok()?;
        let same = !first && step == 0;
        document = document.checked_add(i64::try_from(step).ok()?)?;
        let within = i32::try_from(within).ok()?;
        ordinal = if same { ordinal.checked_add(within)? } else { within };
        first = false;
        each(Posting { document, ordinal, count, title_count, length });
    }
    Some(())
}

fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn read(bytes: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = bytes.split_first()?;
        *bytes = rest;
        value |= u64::from(byte & 0x7f).checked_shl(shift)?;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(bytes: &[u8]) -> Option<Vec<Posting>> {
        let mut out = Vec::new();
        decode(bytes, |p| out.push(p))?;
        Some(out)
    }

    #[test]
    fn postings_come_back_as_they_went_in() {
        let postings = vec![
            Posting { document: 3, ordinal: 0, count: 1, title_count: 0, length: 12 },
            Posting { document: 3, ordinal: 7, count: 2, title_count: 1, length: 300 },
            Posting { document: 3, ordinal: 900, count: 1, title_count: 1, length: 5 },
            Posting { document: 4, ordinal: 2, count: 1, title_count: 0, length: 40 },
            Posting { document: 1_000_000_000_000, ordinal: 0, count: i16::MAX, title_count: 0, length: i32::MAX },
        ];
        let bytes = encode(&postings);
        assert_eq!(all(&bytes).unwrap(), postings);
        assert_eq!(all(&encode(&[])).unwrap(), []);
        // Small passages of consecutive documents: 5 bytes each.
        let small: Vec<Posting> = (0..100)
            .map(|d| Posting { document: 10_000 + d, ordinal: 0, count: 1, title_count: 0, length: 60 })
            .collect();
        assert!(encode(&small).len() <= 1 + 3 + 5 * 100);
        assert_eq!(all(&encode(&small)).unwrap(), small);
    }

    #[test]
    fn what_is_not_an_encoding_is_refused() {
        assert!(all(&[]).is_none());
        assert!(all(&[2, 0, 0, 1, 0, 1]).is_none(), "an unknown version");
        assert!(all(&[1, 0, 0, 1, 0]).is_none(), "a posting cut short");
        assert!(all(&[1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]).is_none());
    }
}
