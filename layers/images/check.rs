//! The image rules of `docs/contract.md` §2.5 and what a passing image leaves behind.
//!
//! Order of work, cheapest first, so an oversized or excessive request costs no allocation:
//! count; each element's shape and MIME type; each image's decoded size, computed from the
//! base64 length alone; the total. Only when all of that holds is any base64 decoded, and then
//! in fixed-size chunks straight into SHA-256: the decoded bytes are never held whole.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytesize::ByteSize;
use sha2::{Digest, Sha256};

use crate::plugin::MAX_ELEMENT_LINES;
use crate::plugin::{CheckedImage, ImageArg, ImageLimits, ImageType};

/// Base64 characters decoded per step (a multiple of 4), and so the scratch buffer's size.
const CHUNK_CHARS: usize = 64 * 1024;

const FIX_BASE64: &str = "encode the image file with standard base64 (A-Z, a-z, 0-9, +, /, \
    with = padding and no spaces or line breaks)";

/// An image that passed the cheap checks and awaits decoding.
struct Candidate {
    index: usize,
    decoded_len: usize,
}

/// Checks the typed `images` of an `agent_run` (their shape and MIME types were checked when
/// the arguments were parsed) against `limits`, and fills in each one's [`CheckedImage`]. All
/// problems are returned, one `<field path>: <what is wrong>; <what to do>` line each.
pub(crate) fn check_images(
    images: &mut [ImageArg],
    limits: &ImageLimits,
) -> Result<(), Vec<String>> {
    // Count and total lines frame the per-element lines, which are listed in element order.
    let mut head = None;
    let mut problems: Vec<(usize, String)> = Vec::new();
    let too_many = images.len() > limits.max_count;
    if too_many {
        head = Some(format!(
            "images: {} images given, at most {} are allowed; send fewer images",
            images.len(),
            limits.max_count
        ));
    }
    let max_bytes = limits.max_bytes.as_u64();
    let mut total: u64 = 0;
    let mut candidates = Vec::with_capacity(images.len().min(limits.max_count));
    for (index, image) in images.iter().enumerate() {
        let decoded_len = match predicted_len(&image.data_base64) {
            Ok(len) => len,
            Err(problem) => {
                problems.push((index, format!("images[{index}].data_base64: {problem}")));
                continue;
            }
        };
        let size = decoded_len as u64;
        total = total.saturating_add(size);
        if size > max_bytes {
            problems.push((index, format!(
                "images[{index}].data_base64: the image is {} decoded, over the {} allowed per image; send a smaller image",
                ByteSize::b(size),
                limits.max_bytes
            )));
        } else {
            candidates.push(Candidate { index, decoded_len });
        }
    }
    let too_big = total > limits.max_total_bytes.as_u64();
    let mut tail = None;
    if too_big {
        tail = Some(format!(
            "images: the images total {} decoded, over the {} allowed per request; send fewer or smaller images",
            ByteSize::b(total),
            limits.max_total_bytes
        ));
    }
    // Decoding is the only costly step: skip it when the request is refused anyway for its
    // count or total size.
    if !too_many && !too_big {
        let mut scratch = vec![0u8; CHUNK_CHARS / 4 * 3];
        for c in candidates {
            let Some(image) = images.get_mut(c.index) else {
                continue;
            };
            match decode(image, &mut scratch) {
                Ok(checked) => {
                    debug_assert_eq!(checked.decoded_len, c.decoded_len);
                    image.checked = Some(checked);
                }
                Err(problem) => {
                    problems.push((
                        c.index,
                        format!("images[{}].data_base64: {problem}", c.index),
                    ));
                }
            }
        }
    }
    if head.is_none() && tail.is_none() && problems.is_empty() {
        return Ok(());
    }
    problems.sort_by_key(|(index, _)| *index);
    // A huge array of bad elements must not make a huge answer.
    let unlisted = problems.len().saturating_sub(MAX_ELEMENT_LINES);
    problems.truncate(MAX_ELEMENT_LINES);
    let more = (unlisted > 0)
        .then(|| format!("images: {unlisted} more problems not listed; fix these and call again"));
    Err(head
        .into_iter()
        .chain(problems.into_iter().map(|(_, line)| line))
        .chain(more)
        .chain(tail)
        .collect())
}

/// The decoded size of padded standard base64, from its length and padding alone: no pass
/// over the data unless it is already known to be wrong (then one, to say where).
fn predicted_len(data: &str) -> Result<usize, String> {
    let bytes = data.as_bytes();
    let padding = bytes.iter().rev().take_while(|&&b| b == b'=').count();
    if bytes.len().is_multiple_of(4) && padding <= 2 {
        return Ok(bytes.len() / 4 * 3 - padding);
    }
    let body = &bytes[..bytes.len() - padding];
    if let Some(at) = body.iter().position(|&b| !is_base64_char(b) || b == b'=') {
        return Err(invalid_char(at, bytes[at]));
    }
    Err(format!(
        "is not valid base64: its length, {}, does not fit standard = padding; {FIX_BASE64}",
        bytes.len()
    ))
}

fn is_base64_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=')
}

/// Decodes `image` chunk by chunk into SHA-256 and checks its magic bytes against its MIME
/// type.
fn decode(image: &ImageArg, scratch: &mut [u8]) -> Result<CheckedImage, String> {
    if image.data_base64.is_empty() {
        return Err("is empty; give the image bytes as standard base64".to_owned());
    }
    let mut hasher = Sha256::new();
    let mut head = [0u8; 12];
    let mut head_len = 0;
    let mut decoded_len = 0;
    let bytes = image.data_base64.as_bytes();
    let chunks = bytes.len().div_ceil(CHUNK_CHARS);
    for (n, chunk) in bytes.chunks(CHUNK_CHARS).enumerate() {
        let offset = n * CHUNK_CHARS;
        // The decoder takes padding at the end of a chunk for the end of the data; only the
        // last chunk may end so. (Padding anywhere else is an invalid byte to the decoder.)
        if n + 1 < chunks && chunk.last() == Some(&b'=') {
            let at = chunk.len() - chunk.iter().rev().take_while(|&&b| b == b'=').count();
            return Err(invalid_char(offset + at, b'='));
        }
        let len = STANDARD
            .decode_slice(chunk, scratch)
            .map_err(|e| describe_base64_error(&e, offset))?;
        let out = scratch.get(..len).unwrap_or_default();
        let take = out.len().min(head.len() - head_len);
        head[head_len..head_len + take].copy_from_slice(&out[..take]);
        head_len += take;
        hasher.update(out);
        decoded_len += len;
    }
    let declared = image.mime_type;
    match ImageType::sniff(&head[..head_len]) {
        Some(kind) if kind == declared => Ok(CheckedImage {
            decoded_len,
            sha256: hasher.finalize().into(),
        }),
        Some(kind) => Err(format!(
            "the data is a {} image but mime_type says {}; set mime_type to {} or send a {} image",
            kind.name(),
            declared.mime(),
            kind.mime(),
            declared.name()
        )),
        None => Err(format!(
            "the data is not a PNG, JPEG or WebP image (mime_type says {}); send the image file's bytes",
            declared.mime()
        )),
    }
}

fn describe_base64_error(e: &base64::DecodeSliceError, offset: usize) -> String {
    use base64::{DecodeError, DecodeSliceError};
    let why = match e {
        DecodeSliceError::DecodeError(DecodeError::InvalidByte(at, byte))
        | DecodeSliceError::DecodeError(DecodeError::InvalidLastSymbol(at, byte)) => {
            return invalid_char(offset + at, *byte);
        }
        DecodeSliceError::DecodeError(DecodeError::InvalidPadding) => {
            "its = padding is wrong".to_owned()
        }
        DecodeSliceError::DecodeError(DecodeError::InvalidLength(_)) => {
            "its length is not valid".to_owned()
        }
        DecodeSliceError::OutputSliceTooSmall => "it could not be decoded".to_owned(),
    };
    format!("is not valid base64: {why}; {FIX_BASE64}")
}

fn invalid_char(at: usize, byte: u8) -> String {
    let shown = match byte {
        b' ' => "a space".to_owned(),
        b'\n' | b'\r' => "a line break".to_owned(),
        b'\t' => "a tab".to_owned(),
        0x21..=0x7e => format!("'{}'", byte as char),
        _ => format!("byte 0x{byte:02X}"),
    };
    format!("is not valid base64: {shown} at position {at}; {FIX_BASE64}")
}

#[cfg(test)]
#[path = "check_tests.rs"]
mod tests;
