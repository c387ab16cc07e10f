//! `coo-assembler export`: MatrixMarket, scipy .npz or PETSc binary of a
//! matrix; a rank-1 tensor as a PETSc Vec or a NumPy .npy vector.

use crate::matvec::MatrixCommon;
use crate::names::{named, size};
use crate::{open, pick_view};
use clap::Args;
use coo_assembler::matrix::export::{self, ExportOptions, Format, NpzLayout};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Args)]
pub(crate) struct ExportArgs {
    /// The Hurray file (a matrix; a rank-1 tensor for npy and petsc).
    file: PathBuf,
    /// The output file (replaced atomically; not the Hurray file itself).
    out: PathBuf,
    /// Output format.
    #[arg(long, value_parser = named::<Format>())]
    to: Format,
    /// MatrixMarket: check symmetry (refuse otherwise) and write one triangle.
    #[arg(long)]
    symmetric: bool,
    /// .npz: which scipy array to write.
    #[arg(long, value_parser = named::<NpzLayout>(), default_value = "auto")]
    npz_layout: NpzLayout,
    /// PETSc: 64-bit indices, for PETSc built --with-64-bit-indices.
    #[arg(long)]
    petsc_int64: bool,
    /// Memory for putting entries in the format's order when the stored order differs
    /// (PETSc or csr from CSC / unsorted COO, csc from COO / CSR, --symmetric on anything
    /// but sorted COO); plus 8 bytes per row (column).
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = size)]
    reorder_memory: u64,
    /// .npz: use zip64 records from this many bytes on (testing readers; default 4 GiB).
    #[arg(long, hide = true, default_value_t = 0)]
    zip64_at: u64,
    #[command(flatten)]
    common: MatrixCommon,
}

pub(crate) fn run(a: ExportArgs) -> anyhow::Result<ExitCode> {
    if a.symmetric && a.to != Format::Mtx {
        return Err(crate::usage(
            "--symmetric is a MatrixMarket option (--to mtx)",
        ));
    }
    let f = open(&a.file, false)?;
    let t = pick_view(&f, &a.common.pick, "export")?;
    let format = a.to;
    let opts = ExportOptions {
        symmetric: a.symmetric,
        npz_layout: a.npz_layout,
        petsc_int64: a.petsc_int64,
        paging: a.common.paging,
        reorder_budget: usize::try_from(a.reorder_memory).unwrap_or(usize::MAX),
        zip64_at: a.zip64_at,
    };
    let t0 = Instant::now();
    let bar =
        crate::progress::Bar::show(&f.progress(), &a.out.display().to_string(), a.common.quiet);
    let s = export::export_file(&f, Some(t.name()), format, &a.out, &opts);
    drop(bar);
    let s = s?;
    let secs = t0.elapsed().as_secs_f64();
    if !a.common.quiet {
        let rate = rate_text(s.bytes, secs);
        eprintln!(
            "wrote {}: {} {}, {} in {:.2} s{rate}",
            a.out.display(),
            coo_assembler::element::group_digits(u128::from(s.entries)),
            if s.entries == 1 { "entry" } else { "entries" },
            coo_assembler::vocab::format_size(s.bytes),
            secs,
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// " (N MB/s)" for a summary, or nothing: a rate is told only when there
/// was time enough to measure one and it reads as more than zero (a small
/// export slowed by fsync would say "0 MB/s").
fn rate_text(bytes: u64, secs: f64) -> String {
    let mb_per_s = bytes as f64 / 1e6 / secs.max(1e-9);
    if secs >= 0.05 && mb_per_s >= 0.5 {
        format!(" ({mb_per_s:.0} MB/s)")
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::rate_text;

    #[test]
    fn a_rate_is_told_only_when_it_reads_as_more_than_zero() {
        assert_eq!(rate_text(200_000_000, 1.0), " (200 MB/s)");
        assert_eq!(rate_text(600_000, 1.0), " (1 MB/s)");
        // Too fast to time, or too small to read as more than 0.
        assert_eq!(rate_text(200_000_000, 0.01), "");
        assert_eq!(rate_text(4_096, 0.2), "");
        assert_eq!(rate_text(0, 1.0), "");
    }
}
