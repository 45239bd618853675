//! The image rules, one by one, without a service around them.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytesize::ByteSize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::*;

const PNG_1X1: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

fn limits() -> ImageLimits {
    ImageLimits::default()
}

fn image(mime: &str, data: &str) -> Value {
    json!({"mime_type": mime, "data_base64": data})
}

/// Base64 of `len` bytes starting with `magic`, zero-filled.
fn data_with(magic: &[u8], len: usize) -> String {
    let mut bytes = vec![0u8; len];
    bytes[..magic.len()].copy_from_slice(magic);
    STANDARD.encode(bytes)
}

/// The images of an `agent_run` as its arguments arrive, through the typed parse (shape and
/// MIME type) and then [`check_images`] (everything that needs the limits).
fn check(images: Value, limits: &ImageLimits) -> Result<Vec<CheckedImage>, Vec<String>> {
    let Value::Object(args) = json!({"request": "look", "images": images}) else {
        unreachable!("a literal object")
    };
    let Some(parsed) = crate::plugin::ToolCall::parse(crate::plugin::AGENT_RUN, args) else {
        panic!("agent_run is one of our tools")
    };
    let mut args = match parsed? {
        crate::plugin::ToolCall::Run(args) => args,
        other => panic!("agent_run parsed as {other:?}"),
    };
    check_images(&mut args.images, limits)?;
    Ok(args
        .images
        .iter()
        .map(|image| image.checked.expect("a passing image is checked"))
        .collect())
}

fn problems(images: Value) -> Vec<String> {
    match check(images, &limits()) {
        Ok(ok) => panic!("expected problems, got {ok:?}"),
        Err(p) => p,
    }
}

#[test]
fn no_images_is_an_empty_list() {
    assert_eq!(check(Value::Null, &limits()), Ok(vec![]));
    assert_eq!(check(json!([]), &limits()), Ok(vec![]));
}

#[test]
fn each_format_passes_with_its_size_and_hash() {
    let webp = data_with(b"RIFF\0\0\0\0WEBPVP8 ", 40);
    let jpeg = data_with(&[0xFF, 0xD8, 0xFF, 0xE0], 4);
    let got = check(
        json!([
            image("image/png", PNG_1X1),
            image("image/webp", &webp),
            image("image/jpeg", &jpeg)
        ]),
        &limits(),
    );
    let hash =
        |b64: &str| -> [u8; 32] { Sha256::digest(STANDARD.decode(b64).unwrap_or_default()).into() };
    assert_eq!(
        got,
        Ok(vec![
            CheckedImage {
                decoded_len: 70,
                sha256: hash(PNG_1X1)
            },
            CheckedImage {
                decoded_len: 40,
                sha256: hash(&webp)
            },
            CheckedImage {
                decoded_len: 4,
                sha256: hash(&jpeg)
            },
        ])
    );
}

#[test]
fn hashing_in_chunks_matches_hashing_at_once() {
    // Several decode steps, with padding in the last one.
    let len = CHUNK_CHARS / 4 * 3 * 2 + 1;
    let data = data_with(b"\x89PNG\r\n\x1a\n", len);
    let Ok(got) = check(json!([image("image/png", &data)]), &limits()) else {
        panic!("a valid image");
    };
    let expected: [u8; 32] = Sha256::digest(STANDARD.decode(&data).unwrap_or_default()).into();
    assert_eq!(got[0].decoded_len, len);
    assert_eq!(got[0].sha256, expected);
}

#[test]
fn null_and_wrongly_typed_parts_are_named() {
    assert_eq!(
        problems(
            json!([null, {"mime_type": null, "data_base64": PNG_1X1}, {"mime_type": "image/png"}, 7])
        ),
        vec![
            "images[0]: must be an object with mime_type and data_base64, not null; send one object per image",
            "images[1].mime_type: must not be null; use image/png, image/jpeg or image/webp",
            "images[2].data_base64: missing; give the image bytes as standard base64",
            "images[3]: must be an object with mime_type and data_base64; send one object per image",
        ]
    );
    assert_eq!(
        problems(json!({"mime_type": "image/png"})),
        vec![
            "images: must be an array or null, got an object; send an array of {mime_type, data_base64} objects, or omit it"
        ]
    );
}

#[test]
fn only_png_jpeg_and_webp_are_allowed() {
    assert_eq!(
        problems(json!([image("image/gif", "R0lGODlh")])),
        vec![
            "images[0].mime_type: \"image/gif\" is not supported; use image/png, image/jpeg or image/webp"
        ]
    );
}

#[test]
fn base64_must_be_standard() {
    let cases = [
        ("iVBO RK", "a space at position 4"),
        ("iVBO\nRKGg", "a line break at position 4"),
        ("iVBO-_Gg", "'-' at position 4"),
        ("iVBORw0", "its length, 7, does not fit standard = padding"),
        ("AA==AAAA", "'=' at position 2"),
        ("A===", "its length, 4, does not fit standard = padding"),
        ("iVBORw0KGgp=", "'p' at position 10"),
    ];
    for (data, why) in cases {
        assert_eq!(
            problems(json!([image("image/png", data)])),
            vec![format!(
                "images[0].data_base64: is not valid base64: {why}; {FIX_BASE64}"
            )],
            "{data:?}"
        );
    }
}

#[test]
fn padding_at_a_chunk_boundary_is_not_the_end() {
    let mut data = "A".repeat(CHUNK_CHARS - 2);
    data.push_str("==");
    data.push_str("AAAA");
    assert_eq!(
        problems(json!([image("image/png", &data)])),
        vec![format!(
            "images[0].data_base64: is not valid base64: '=' at position {}; {FIX_BASE64}",
            CHUNK_CHARS - 2
        )]
    );
}

#[test]
fn magic_bytes_must_agree_with_the_mime_type() {
    assert_eq!(
        problems(json!([
            image("image/jpeg", PNG_1X1),
            image("image/png", &data_with(b"hello", 5)),
            image("image/webp", ""),
        ])),
        vec![
            "images[0].data_base64: the data is a PNG image but mime_type says image/jpeg; set mime_type to image/png or send a JPEG image",
            "images[1].data_base64: the data is not a PNG, JPEG or WebP image (mime_type says image/png); send the image file's bytes",
            "images[2].data_base64: is empty; give the image bytes as standard base64",
        ]
    );
}

#[test]
fn count_and_sizes_are_refused_before_decoding() {
    // All zero bytes: decoding would find no image magic, so a size message alone shows that
    // nothing was decoded.
    let huge = "A".repeat(4 * 3_844_779); // 11 MiB (and 1 B) decoded
    assert_eq!(
        problems(json!([image("image/png", &huge)])),
        vec![
            "images[0].data_base64: the image is 11.0 MiB decoded, over the 10.0 MiB allowed per image; send a smaller image"
        ]
    );
    let eight = "A".repeat(4 * 2_796_203); // just over 8 MiB
    assert_eq!(
        problems(json!([
            image("image/png", &eight),
            image("image/png", &eight),
            image("image/png", &eight)
        ])),
        vec![
            "images: the images total 24.0 MiB decoded, over the 20.0 MiB allowed per request; send fewer or smaller images"
        ]
    );
    let five = vec![image("image/png", "AAAA"); 5];
    assert_eq!(
        problems(Value::Array(five)),
        vec!["images: 5 images given, at most 4 are allowed; send fewer images"]
    );
}

#[test]
fn limits_come_from_the_config() {
    let small = ImageLimits {
        max_count: 1,
        max_bytes: ByteSize::b(69),
        max_total_bytes: ByteSize::b(100),
    };
    assert_eq!(
        check(json!([image("image/png", PNG_1X1)]), &small),
        Err(vec!["images[0].data_base64: the image is 70 B decoded, over the 69 B allowed per image; send a smaller image".to_owned()])
    );
}

#[test]
fn a_flood_of_bad_elements_is_cut_short() {
    // The shape is checked when the arguments are parsed, before any limit.
    let problems = problems(Value::Array(vec![Value::Null; 1000]));
    assert_eq!(problems.len(), 20 + 1);
    assert_eq!(
        problems[19],
        "images[19]: must be an object with mime_type and data_base64, not null; send one object per image"
    );
    assert_eq!(
        problems[20],
        "images: 980 more problems not listed; fix these and call again"
    );
    // A flood of elements that are well-formed but over the limits is cut short the same way.
    let bad = image("image/png", "not base64!");
    let problems = self::problems(Value::Array(vec![bad; 1000]));
    assert_eq!(problems.len(), 1 + 20 + 1);
    assert_eq!(
        problems[0],
        "images: 1000 images given, at most 4 are allowed; send fewer images"
    );
    assert_eq!(
        problems[21],
        "images: 980 more problems not listed; fix these and call again"
    );
}

/// Typed images straight from base64 texts, for [`decode_all`].
fn typed(texts: &[String]) -> Vec<ImageArg> {
    texts
        .iter()
        .map(|data| ImageArg {
            mime_type: ImageType::Png,
            data_base64: data.clone(),
            checked: None,
        })
        .collect()
}

#[test]
fn decoding_on_several_threads_gives_each_image_its_own_outcome() {
    // Over PARALLEL_FROM in all, of unequal sizes, with a bad one among them: every image
    // gets the outcome a single thread gives it, under its own index.
    let mut texts: Vec<String> = [700_000usize, 300_000, 520_000, 90_000]
        .iter()
        .map(|&len| data_with(b"\x89PNG\r\n\x1a\n", len))
        .collect();
    texts[2].replace_range(1000..1001, "*");
    let images = typed(&texts);
    let candidates: Vec<Candidate> = texts
        .iter()
        .enumerate()
        .map(|(index, text)| Candidate {
            index,
            decoded_len: predicted_len(text).unwrap_or(0),
        })
        .collect();
    let sorted = |mut v: Vec<(usize, Result<CheckedImage, String>)>| {
        v.sort_by_key(|(index, _)| *index);
        v
    };
    let one = sorted(decode_all(&images, &candidates, 1));
    for threads in [2, 3, 8] {
        assert_eq!(
            sorted(decode_all(&images, &candidates, threads)),
            one,
            "{threads} threads"
        );
    }
    assert_eq!(one.len(), 4);
    for (index, outcome) in &one {
        let expected = STANDARD
            .decode(&texts[*index])
            .map(|bytes| <[u8; 32]>::from(Sha256::digest(&bytes)));
        match (outcome, expected) {
            (Ok(checked), Ok(hash)) => assert_eq!(checked.sha256, hash, "image {index}"),
            (Err(problem), Err(_)) => assert!(problem.contains("'*'"), "image {index}: {problem}"),
            (got, want) => panic!("image {index}: got {got:?}, base64 says {want:?}"),
        }
    }
}
