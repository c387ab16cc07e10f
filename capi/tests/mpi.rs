//! The C API's distributed calls (feature `mpi`): `tests/c/dist.c`, built
//! with `mpicc`, and `tests/fortran/dist.f90` with `mpif90` (module
//! `fortran/coo_assembler_mpi.f90`), both against `libcoo_assembler.so` built with `--features mpi`,
//! run under `mpirun` on 1 to 4 ranks (oversubscribed), every rank must
//! report OK. Run by `.ci/run` as
//! `cargo test --release -p coo-assembler-capi --features mpi --test mpi`.
//! Skips, saying so, without `mpicc` or `mpirun`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use coo_assembler_testkit::find_program;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let (Some(mpicc), Some(mpirun)) = (find_program("mpicc"), find_program("mpirun")) else {
        println!(
            "SKIPPED: mpicc or mpirun is not on the PATH (install openmpi-bin and libopenmpi-dev)"
        );
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf();
    // This test runs as <target>/<profile>/deps/<name>-<hash>: build the C
    // library with the same profile and feature into that target.
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
    let target_dir = profile_dir.parent().unwrap().to_path_buf();
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev".to_string(),
        Some(p) => p.to_string(),
        None => panic!("no profile directory"),
    };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let built = Command::new(cargo)
        .args([
            "build",
            "--lib",
            "-p",
            "coo-assembler-capi",
            "--features",
            "mpi",
            "--profile",
            &profile,
        ])
        .arg("--target-dir")
        .arg(&target_dir)
        .current_dir(&root)
        .status()
        .unwrap();
    assert!(
        built.success(),
        "cargo build of the C library with MPI failed"
    );
    let dir = tempfile::tempdir().unwrap();
    let prog: PathBuf = dir.path().join("dist");
    let cc = Command::new(mpicc)
        .arg(root.join("capi/tests/c/dist.c"))
        .arg("-I")
        .arg(root.join("include"))
        .arg("-I")
        .arg(root.join("capi/tests/c"))
        .arg("-L")
        .arg(&profile_dir)
        .arg(format!("-Wl,-rpath,{}", profile_dir.display()))
        .args(["-lcoo_assembler", "-o"])
        .arg(&prog)
        .output()
        .unwrap();
    assert!(
        cc.status.success(),
        "mpicc failed:\n{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    // The Fortran program, built with mpif90 against both modules.
    let mut progs = vec![("C", prog)];
    if let Some(mpif90) = find_program("mpif90") {
        let fprog = dir.path().join("dist_f");
        let fc = Command::new(mpif90)
            .arg(root.join("fortran/coo_assembler.f90"))
            .arg(root.join("fortran/coo_assembler_mpi.f90"))
            .arg(root.join("capi/tests/fortran/dist.f90"))
            .arg("-J")
            .arg(dir.path())
            .arg("-L")
            .arg(&profile_dir)
            .arg(format!("-Wl,-rpath,{}", profile_dir.display()))
            .args(["-lcoo_assembler", "-o"])
            .arg(&fprog)
            .output()
            .unwrap();
        assert!(
            fc.status.success(),
            "mpif90 failed:\n{}",
            String::from_utf8_lossy(&fc.stderr)
        );
        progs.push(("Fortran", fprog));
    } else {
        println!("SKIPPED the Fortran program: mpif90 is not on the PATH");
    }
    // PETSc, when installed: the bands given to MatCreateMPIAIJWithArrays.
    let petsc = Command::new("pkg-config")
        .args(["--cflags", "--libs", "petsc"])
        .output()
        .ok()
        .filter(|o| o.status.success());
    match petsc {
        Some(flags) => {
            let pprog = dir.path().join("dist_petsc");
            let flags = String::from_utf8_lossy(&flags.stdout).into_owned();
            let pc = Command::new(find_program("mpicc").unwrap())
                .arg(root.join("capi/tests/c/dist_petsc.c"))
                .arg("-I")
                .arg(root.join("include"))
                .arg("-I")
                .arg(root.join("capi/tests/c"))
                .args(flags.split_whitespace())
                .arg("-L")
                .arg(&profile_dir)
                .arg(format!("-Wl,-rpath,{}", profile_dir.display()))
                .args(["-lcoo_assembler", "-o"])
                .arg(&pprog)
                .output()
                .unwrap();
            assert!(
                pc.status.success(),
                "mpicc of the PETSc program failed:\n{}",
                String::from_utf8_lossy(&pc.stderr)
            );
            progs.push(("PETSc", pprog));
        }
        None => println!("SKIPPED the PETSc program: PETSc is not installed (Debian: petsc-dev)"),
    }
    let mut failed = Vec::new();
    for ((lang, prog), k) in progs.iter().flat_map(|p| (1..=4).map(move |k| (p, k))) {
        let out = Command::new(&mpirun)
            .args(["-n", &k.to_string(), "--oversubscribe", "--timeout", "300"])
            .arg(prog)
            .current_dir(dir.path())
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let oks = (0..k)
            .filter(|r| stdout.contains(&format!("dist rank {r} OK")))
            .count();
        if !out.status.success() || oks != k || stdout.contains("FAIL") {
            eprintln!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
            failed.push(format!("{lang} x{k}"));
        } else {
            println!("test {lang} dist x{k} ... ok");
        }
    }
    assert!(
        failed.is_empty(),
        "C distributed program failed with {failed:?} ranks"
    );
    assert!(!dir.path().join("never.hrry").exists());
}
