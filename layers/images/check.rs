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

/// Decoded bytes from which the images of one request are decoded on several threads: below
/// it a thread costs more than it saves.
const PARALLEL_FROM: usize = 1024 * 1024;

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
        for (index, decoded) in decode_all(images, &candidates, parallelism()) {
            let Some(image) = images.get_mut(index) else {
                continue;
            };
            match decoded {
                Ok(checked) => image.checked = Some(checked),
                Err(problem) => {
                    problems.push((index, format!("images[{index}].data_base64: {problem}")));
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

/// How many threads may decode at once: the machine's cores (1 if that is unknown).
fn parallelism() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

/// Decodes every candidate, answering `(index, outcome)` for each. Up to `threads` images are
/// decoded at the same time when there is enough to decode to pay for a thread (decoding and
/// hashing is the one costly step of an accept: 20 MiB takes about 50 ms on one core); the
/// work is split by size, largest image first onto the least-loaded thread. A thread that
/// cannot be started leaves its share to the calling thread.
fn decode_all(
    images: &[ImageArg],
    candidates: &[Candidate],
    threads: usize,
) -> Vec<(usize, Result<CheckedImage, String>)> {
    let run = |share: &[&Candidate]| {
        let mut scratch = vec![0u8; CHUNK_CHARS / 4 * 3];
        share
            .iter()
            .filter_map(|c| {
                images
                    .get(c.index)
                    .map(|image| (c.index, decode(image, &mut scratch)))
            })
            .collect::<Vec<_>>()
    };
    let total: usize = candidates.iter().map(|c| c.decoded_len).sum();
    let threads = threads.min(candidates.len()).max(1);
    if threads == 1 || total < PARALLEL_FROM {
        let all: Vec<&Candidate> = candidates.iter().collect();
        return run(&all);
    }
    let mut shares: Vec<(usize, Vec<&Candidate>)> = vec![(0, Vec::new()); threads];
    let mut by_size: Vec<&Candidate> = candidates.iter().collect();
    by_size.sort_by_key(|c| std::cmp::Reverse(c.decoded_len));
    for c in by_size {
        if let Some((load, share)) = shares.iter_mut().min_by_key(|(load, _)| *load) {
            *load += c.decoded_len;
            share.push(c);
        }
    }
    std::thread::scope(|scope| {
        let (own, others) = shares
            .split_first()
            .map_or((&[][..], &[][..]), |(first, rest)| {
                (first.1.as_slice(), rest)
            });
        let started: Vec<_> = others
            .iter()
            .map(|(_, share)| {
                let spawned = std::thread::Builder::new()
                    .name("agent-mcp-images".into())
                    .spawn_scoped(scope, || run(share));
                (share, spawned)
            })
            .collect();
        let mut done = run(own);
        for (share, spawned) in started {
            match spawned {
                Ok(handle) => match handle.join() {
                    Ok(decoded) => done.extend(decoded),
                    Err(panic) => std::panic::resume_unwind(panic),
                },
                Err(_) => done.extend(run(share)),
            }
        }
        done
    })
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
