//! Reading one f32 tensor from a safetensors file, by hand.
//!
//! The format is small enough not to need its crate: a u64 little-endian header
//! length, a JSON header `{name: {dtype, shape, data_offsets: [begin, end]}}`
//! (plus an optional `__metadata__`), then the raw little-endian data, offsets
//! counted from the end of the header.

use serde::Deserialize;

/// The header may not exceed this (the format's own limit): a corrupt length
/// must not make the reader allocate gigabytes.
const MAX_HEADER: u64 = 100_000_000;

/// One tensor: its shape and its values in row-major order.
pub(crate) struct Tensor {
    pub shape: Vec<usize>,
    pub values: Vec<f32>,
}

/// Why the tensor could not be read. Truncation is told apart from other
/// damage: it is the usual result of an interrupted copy.
#[derive(Debug)]
pub(crate) enum Error {
    Truncated(String),
    Malformed(String),
}

#[derive(Deserialize)]
struct Entry {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: [u64; 2],
}

/// The tensor `name` of the safetensors file in `bytes`, which must be F32.
pub(crate) fn read_f32(bytes: &[u8], name: &str) -> Result<Tensor, Error> {
    let (length, rest) = bytes
        .split_first_chunk::<8>()
        .ok_or_else(|| Error::Truncated(format!("{} bytes, shorter than the 8-byte header length", bytes.len())))?;
    let header_len = u64::from_le_bytes(*length);
    if header_len > MAX_HEADER {
        return Err(Error::Malformed(format!("header length {header_len} is not plausible")));
    }
    // Bounded by MAX_HEADER above, so it fits a usize.
    let header_len = header_len as usize;
    let (header, data) = rest.split_at_checked(header_len).ok_or_else(|| {
        Error::Truncated(format!("{} bytes, the header alone announces {}", bytes.len(), 8 + header_len))
    })?;
    let mut entries: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(header).map_err(|e| Error::Malformed(format!("header is not JSON: {e}")))?;
    let entry = entries.remove(name).ok_or_else(|| Error::Malformed(format!("no tensor named {name}")))?;
    let entry: Entry =
        serde_json::from_value(entry).map_err(|e| Error::Malformed(format!("tensor {name}: bad header entry: {e}")))?;
    if entry.dtype != "F32" {
        return Err(Error::Malformed(format!("tensor {name} is {}, not F32", entry.dtype)));
    }
    let count = entry.shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    let [begin, end] = entry.data_offsets;
    let expected_len = count.and_then(|n| n.checked_mul(4)).map(|n| n as u64);
    if begin > end || expected_len != Some(end - begin) {
        return Err(Error::Malformed(format!(
            "tensor {name}: offsets [{begin}, {end}] do not hold shape {:?} of F32",
            entry.shape
        )));
    }
    let range = usize::try_from(begin).ok().zip(usize::try_from(end).ok());
    let raw = range.and_then(|(b, e)| data.get(b..e)).ok_or_else(|| {
        Error::Truncated(format!(
            "{} bytes, the header announces {}",
            bytes.len(),
            (8 + header_len as u64).saturating_add(end)
        ))
    })?;
    let values = raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    Ok(Tensor { shape: entry.shape, values })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(header: &str, data: &[u8]) -> Vec<u8> {
        let mut out = (header.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        out
    }

    fn floats(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn reads_the_named_tensor_in_row_major_order() {
        let header = r#"{"__metadata__":{"format":"pt"},"other":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"t":{"dtype":"F32","shape":[2,2],"data_offsets":[4,20]}}"#;
        let bytes = file(header, &floats(&[9.0, 1.0, -2.0, 3.5, 0.25]));
        let t = read_f32(&bytes, "t").unwrap();
        assert_eq!(t.shape, [2, 2]);
        assert_eq!(t.values, [1.0, -2.0, 3.5, 0.25]);
    }

    #[test]
    fn tells_truncation_from_damage() {
        let header = r#"{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
        let whole = file(header, &floats(&[1.0, 2.0]));
        for cut in [0, 7, 20, whole.len() - 1] {
            assert!(matches!(read_f32(&whole[..cut], "t"), Err(Error::Truncated(_))), "cut at {cut}");
        }
        let mut bad = whole.clone();
        bad[8] = b'[';
        assert!(matches!(read_f32(&bad, "t"), Err(Error::Malformed(_))));
        assert!(matches!(read_f32(&whole, "u"), Err(Error::Malformed(_))));
        let mut huge = whole.clone();
        huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(read_f32(&huge, "t"), Err(Error::Malformed(_))));
    }

    #[test]
    fn refuses_other_types_and_inconsistent_offsets() {
        let f16 = file(r#"{"t":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}}"#, &[0; 4]);
        assert!(matches!(read_f32(&f16, "t"), Err(Error::Malformed(m)) if m.contains("F16")));
        let short = file(r#"{"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#, &[0; 12]);
        assert!(matches!(read_f32(&short, "t"), Err(Error::Malformed(_))));
        let backwards = file(r#"{"t":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}"#, &[0; 8]);
        assert!(matches!(read_f32(&backwards, "t"), Err(Error::Malformed(_))));
        let overflow = file(r#"{"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}"#, &[0; 8]);
        assert!(matches!(read_f32(&overflow, "t"), Err(Error::Malformed(_))));
    }
}
