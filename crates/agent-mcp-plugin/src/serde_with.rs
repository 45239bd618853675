//! Serde adapters for `agent.yaml`'s sizes and durations, shared by the configuration and the
//! plugin surface's own settings (the image limits); a leaf: it imports nothing of the crate.

/// Byte sizes that print back exactly: `"10 MiB"` when the value is a whole number of KiB, MiB
/// or GiB, else the plain byte count (bytesize's own `Serialize` rounds, e.g. 1537 → "1.5 KiB").
/// Reading accepts both forms.
pub mod exact_size {
    use bytesize::ByteSize;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(size: &ByteSize, s: S) -> Result<S::Ok, S::Error> {
        let bytes = size.as_u64();
        for (unit, name) in [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")] {
            if bytes > 0 && bytes.is_multiple_of(unit) {
                return s.serialize_str(&format!("{} {name}", bytes / unit));
            }
        }
        s.serialize_u64(bytes)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ByteSize, D::Error> {
        ByteSize::deserialize(d)
    }

    pub mod option {
        use bytesize::ByteSize;
        use serde::{Deserialize, Deserializer, Serializer};

        pub fn serialize<S: Serializer>(size: &Option<ByteSize>, s: S) -> Result<S::Ok, S::Error> {
            match size {
                Some(size) => super::serialize(size, s),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ByteSize>, D::Error> {
            Option::<ByteSize>::deserialize(d)
        }
    }
}

/// Durations as humantime strings (`"10m"`, `"5s"`, `"7d"`).
pub mod humantime_serde_compat {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text).map_err(|e| {
            serde::de::Error::custom(format!(
                "\"{text}\" is not a duration ({e}); write e.g. \"30s\", \"10m\" or \"7d\""
            ))
        })
    }

    /// `Option<Duration>`: null, or a humantime string.
    pub mod option {
        use std::time::Duration;

        use serde::{Deserialize, Deserializer, Serializer};

        pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
            match d {
                Some(d) => super::serialize(d, s),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
            #[derive(Deserialize)]
            struct Wrapped(#[serde(deserialize_with = "super::deserialize")] Duration);
            Ok(Option::<Wrapped>::deserialize(d)?.map(|Wrapped(d)| d))
        }
    }
}
