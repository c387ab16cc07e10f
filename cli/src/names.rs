//! The library's vocabulary tables and size grammar as clap value parsers,
//! so that `--help` lists exactly the names the library parses, with the
//! library's one-line meaning of each, and a bad value gets the library's
//! message.

use clap::builder::{PossibleValue, TypedValueParser};
use clap::error::ErrorKind;
use coo_assembler::vocab::Vocabulary;
use std::ffi::OsStr;
use std::marker::PhantomData;

/// A value parser for the vocabulary `T`.
#[derive(Clone, Copy)]
pub(crate) struct Named<T>(PhantomData<T>);

/// The parser of `T`'s names (use as `value_parser = named::<T>()`).
pub(crate) fn named<T>() -> Named<T> {
    Named(PhantomData)
}

impl<T: Vocabulary + Send + Sync> TypedValueParser for Named<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<T, clap::Error> {
        let s = value.to_string_lossy();
        T::parse(&s).map_err(|e| invalid(cmd, arg, &e.to_string()))
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(T::TERMS.iter().map(|t| {
            PossibleValue::new(t.name)
                .help(t.help)
                .aliases(t.aliases.iter().copied())
        })))
    }
}

/// A byte size in the library's grammar (`value_parser = size`).
pub(crate) fn size(s: &str) -> Result<u64, String> {
    coo_assembler::vocab::parse_size(s).map_err(|e| e.to_string())
}

fn invalid(cmd: &clap::Command, arg: Option<&clap::Arg>, msg: &str) -> clap::Error {
    let name = arg
        .and_then(|a| a.get_long())
        .map_or_else(|| "value".to_string(), |l| format!("--{l}"));
    clap::Error::raw(ErrorKind::InvalidValue, format!("{name}: {msg}\n")).with_cmd(cmd)
}
