//! The vocabulary schedules, the history and reports write as text (`b1`,
//! `t-0`, `leader of t-0`, `HW of b2 for t-0 >= 3`): such a type's text form is
//! its `FromStr` and `Display`, and [`text_form!`] derives the serde glue
//! (`#[serde(try_from = "String", into = "String")]`) from those two, so the
//! form is defined once.

/// `TryFrom<String>` through `FromStr` (with its error, which serde shows
/// through `Display`) and `From<T> for String` through `Display`.
macro_rules! text_form {
    ($t:ty) => {
        impl TryFrom<String> for $t {
            type Error = <$t as std::str::FromStr>::Err;
            fn try_from(s: String) -> Result<Self, Self::Error> {
                s.parse()
            }
        }

        impl From<$t> for String {
            fn from(value: $t) -> String {
                value.to_string()
            }
        }
    };
}

pub(crate) use text_form;
