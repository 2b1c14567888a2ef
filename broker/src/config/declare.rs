//! [`broker_settings!`]: the settings table (`settings.rs`) turned into
//! everything a setting needs, so a setting is declared once. From each entry
//! it makes the setting's row of `SETTINGS` (what `--list-settings` prints and
//! the flag's help), its flag in `ConfigArgs` (clap), which is also its key in
//! the `--config` file (serde), its field in `BrokerConfig`, and what runs
//! over all of them: flags laid over the file (pass 1), each value checked and
//! defaulted by its codec in `value.rs` (pass 2), and the way back, the
//! resolved config as the flags that give it (printed as TOML).
//!
//! Nothing here names a setting, and nothing here decides what a value means
//! (that is the entry's codec): a setting is added to the table, never here.
//! One entry reads:
//!
//! ```text
//! /// Doc of the `BrokerConfig` field (optional).
//! #[arg(value_name = "HOST:PORT")]           // extra clap attributes (optional)
//! listen: Option<String> => String, by BindAddress {
//!     flag: "--listen",                      // the flag; its key is the field name
//!     kind: SettingKind::Address,            // what --list-settings calls it
//!     default: SettingDefault::Text("127.0.0.1:9092"),
//!     help: "…",
//! }
//! ```
//!
//! `Option<String>` is what a flag or the file gives (spelled out, since clap
//! reads the field's type to know a flag is optional or repeated), `String` is
//! what the broker reads, and `BindAddress` the codec between the two. The
//! first entry is `config`, the file itself: a flag, not a key of the file nor
//! a field of the resolved config.

macro_rules! broker_settings {
    // One row of `SETTINGS`, as a constant named by its key.
    (@row $(#[$meta:meta])* $name:ident, $flag:literal, $kind:expr, $default:expr, $help:expr) => {
        $(#[$meta])*
        pub const $name: Setting = Setting {
            name: stringify!($name),
            flag: $flag,
            kind: $kind,
            default: $default,
            help: $help,
        };
    };
    (
        $(#[doc = $config_doc:literal])*
        #[arg($($config_arg:tt)*)]
        $config:ident: $config_given:ty {
            flag: $config_flag:literal,
            kind: $config_kind:expr,
            default: $config_default:expr,
            help: $config_help:expr $(,)?
        }
        $(
            $(#[doc = $doc:literal])*
            $(#[arg($($arg:tt)*)])?
            $field:ident: $given:ty => $value:ty, by $codec:ident {
                flag: $flag:literal,
                kind: $kind:expr,
                default: $default:expr,
                help: $help:expr $(,)?
            }
        )*
    ) => {
        /// Each setting's row of [`SETTINGS`], named by its key.
        #[allow(non_upper_case_globals)]
        pub(super) mod row {
            use super::*;

            broker_settings!(
                @row $(#[doc = $config_doc])*
                $config, $config_flag, $config_kind, $config_default, $config_help
            );
            $(broker_settings!(@row $field, $flag, $kind, $default, $help);)*
        }

        /// Every setting, in the order `--help` and `--list-settings` list them.
        pub const SETTINGS: &[Setting] = &[row::$config, $(row::$field),*];

        /// Every key the flags and the TOML file may set, with the help
        /// [`SETTINGS`] gives it, and the `--list-settings` command. All optional
        /// here; required ones and defaults are applied in [`ConfigArgs::resolve`].
        #[derive(clap::Parser, Debug, Default, serde::Deserialize, serde::Serialize)]
        #[serde(deny_unknown_fields)]
        #[command(
            name = "epochal-broker",
            version,
            about = "Kafka-style broker with etcd in ZooKeeper's role"
        )]
        pub struct ConfigArgs {
            #[arg(long = row::$config.long(), help = row::$config.help)]
            #[arg($($config_arg)*)]
            #[serde(skip)]
            pub $config: $config_given,
            $(
                #[arg(long = row::$field.long(), help = row::$field.help)]
                $(#[arg($($arg)*)])?
                #[serde(default, skip_serializing_if = "crate::config::value::Given::is_unset")]
                pub $field: $given,
            )*
            /// Not a setting: print every setting and failpoint (JSON lines) and exit.
            #[arg(
                long,
                help = "Print every setting and failpoint as JSON lines, then exit"
            )]
            #[serde(skip)]
            pub list_settings: bool,
        }

        /// The validated configuration.
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct BrokerConfig {
            $(
                $(#[doc = $doc])*
                pub $field: $value,
            )*
        }

        impl ConfigArgs {
            /// Pass 1: these flags laid over `file`'s keys, setting by setting;
            /// a flag given wins.
            pub(super) fn over(self, file: ConfigArgs) -> ConfigArgs {
                use crate::config::value::Given;
                ConfigArgs {
                    $config: self.$config,
                    $($field: Given::over(self.$field, file.$field),)*
                    list_settings: self.list_settings,
                }
            }

            /// Pass 2: every setting checked and defaulted by its codec. Of
            /// several bad values, the error names the one
            /// [`check_rank`](crate::config::value::check_rank) puts first.
            pub(super) fn validate(self) -> Result<BrokerConfig, crate::config::ConfigError> {
                use crate::config::value::{Codec, FirstFailure};
                let mut failures = FirstFailure::default();
                $(
                    let $field = failures.keep(
                        crate::config::value::check_rank(&row::$field, SETTINGS),
                        <$codec as Codec<$given, $value>>::resolve(&row::$field, self.$field),
                    );
                )*
                match ($($field,)*) {
                    ($(Some($field),)*) => Ok(BrokerConfig { $($field),* }),
                    _ => Err(failures.into_error()),
                }
            }
        }

        impl BrokerConfig {
            /// The way back: each value as a flag or the file would give it,
            /// so that resolving the result gives this config again.
            pub(super) fn to_args(&self) -> ConfigArgs {
                use crate::config::value::Codec;
                ConfigArgs {
                    $config: Default::default(),
                    $($field: <$codec as Codec<$given, $value>>::print(
                        &row::$field,
                        &self.$field,
                    ),)*
                    list_settings: false,
                }
            }
        }
    };
}

pub(super) use broker_settings;
