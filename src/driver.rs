//! The compilation pipeline behind the subcommands: read, check, lower, generate code, link, run.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use clap::ValueEnum as _;

use cmm_codegen::lower::LoweredProgram;

use crate::cli::{
    Backend, CheckArgs, CodegenOpts, CompileArgs, Emit, Mech, RunArgs, Target, Threads,
};
use crate::error::DriverError;
use crate::link;

/// Reads the source file, or explains why it cannot.
fn read_source(path: &Path) -> Result<String, DriverError> {
    let bytes = std::fs::read(path).map_err(|e| {
        let reason = e.to_string();
        let reason = match reason.find(" (os error") {
            Some(i) => reason[..i].to_string(),
            None => reason,
        };
        DriverError::failure(format!("cannot read {}: {reason}", path.display()))
    })?;
    String::from_utf8(bytes).map_err(|e| {
        DriverError::failure(format!(
            "cannot read {}: not UTF-8 text (invalid byte at offset {})",
            path.display(),
            e.utf8_error().valid_up_to()
        ))
    })
}

/// Runs the front end; diagnostics come back rendered gcc-style.
fn front_end(path: &Path, target: Target) -> Result<cmm_front::typed::Program, DriverError> {
    let src = read_source(path)?;
    let name = path.display().to_string();
    cmm_front::check_rendered(&name, &src, target.info()).map_err(|text| DriverError {
        status: 1,
        message: text,
        rendered: true,
    })
}

/// `cmm check`.
pub fn check(args: &CheckArgs) -> Result<ExitCode, DriverError> {
    front_end(&args.file, args.target)?;
    Ok(ExitCode::SUCCESS)
}

/// Rejects the combinations of options that are not implemented, before any work is done.
fn check_combination(opts: &CodegenOpts) -> Result<(), DriverError> {
    if let Some(size) = opts.chunk_size {
        if !opts.mech.is_chunked() {
            return Err(DriverError::unsupported(format!(
                "--chunk-size {size} applies only to the chunked mechanisms (heap, heap-malloc, \
                 lookahead, mmu, mmu-reuse) and to mtss's pages, not to --mech {}",
                opts.mech.name()
            )));
        }
    }
    if opts.text_offset != 0 && opts.backend != Backend::Emit {
        return Err(DriverError::unsupported(
            "--text-offset needs --backend emit (the native back end places its own code)"
                .to_string(),
        ));
    }
    if opts.preempt_loops && opts.threads != Threads::Green {
        return Err(DriverError::unsupported(
            "--preempt-loops needs --threads green (OS threads are preempted by the kernel)"
                .to_string(),
        ));
    }
    if let (Some(size), true) = (opts.chunk_size, opts.mech.is_chunked()) {
        if opts.mech == Mech::Mtss {
            cmm_codegen::emit::mech::mtss::validate_page_size(size as u64)
                .map_err(|e| DriverError::unsupported(format!("--chunk-size: {e}")))?;
        } else {
            cmm_codegen::callgraph::validate_chunk_size(size as u64)
                .map_err(|e| DriverError::unsupported(format!("--chunk-size: {e}")))?;
        }
    }
    match opts.backend {
        Backend::Emit if emit_mech(opts.mech, opts.chunk_size, opts.target).is_none() => {
            Err(DriverError::unsupported(format!(
                "the emission back end does not implement --mech {}",
                opts.mech.name()
            )))
        }
        Backend::Emit => Ok(()),
        Backend::Native if opts.target != Target::X86_64 => Err(DriverError::unsupported(format!(
            "the native back end generates x86-64 code only; --target {} needs --backend emit",
            opts.target.name()
        ))),
        Backend::Native if opts.mech != Mech::Traditional => {
            Err(DriverError::unsupported(format!(
                "the native back end implements only --mech traditional (Cranelift's own System V \
                 calls); --mech {} needs --backend emit",
                opts.mech.name()
            )))
        }
        Backend::Native => Ok(()),
    }
}

/// Machine code for one program, as the back end produced it.
struct Generated {
    object: Vec<u8>,
    asm: Option<String>,
}

fn generate(
    lowered: &LoweredProgram,
    opts: &CodegenOpts,
    want_asm: bool,
) -> Result<Generated, DriverError> {
    check_combination(opts)?;
    match opts.backend {
        Backend::Native => {
            let out = cmm_codegen::native::compile_native(lowered, want_asm)
                .map_err(|e| DriverError::failure(e.to_string()))?;
            Ok(Generated {
                object: out.object,
                asm: out.disasm,
            })
        }
        Backend::Emit => {
            let emit_opts = cmm_codegen::emit::EmitOptions {
                target: match opts.target {
                    Target::I686 => cmm_codegen::emit::Target::I686,
                    Target::X86_64 => cmm_codegen::emit::Target::X86_64,
                },
                mech: emit_mech(opts.mech, opts.chunk_size, opts.target)
                    .ok_or_else(|| DriverError::unsupported("mechanism"))?,
            };
            let mut asm = cmm_codegen::emit::emit_program(lowered, &emit_opts)
                .map_err(|e| DriverError::failure(e.to_string()))?;
            if opts.text_offset != 0 {
                offset_text(&mut asm, opts.text_offset);
            }
            let object = assemble(opts.target, &asm)?;
            Ok(Generated {
                object,
                asm: Some(asm),
            })
        }
    }
}

/// `--text-offset`: `bytes` of `nop` where the program's text section starts, so that every
/// function and loop lies that much further on (functions keep their own alignment).
fn offset_text(asm: &mut String, bytes: u32) {
    if let Some(at) = asm.find("\t.text\n") {
        let at = at + "\t.text\n".len();
        asm.insert_str(
            at,
            &format!("\t.skip {bytes}, 0x90\t# --text-offset {bytes}: the code moved on\n"),
        );
    }
}

/// The emission stage's mechanism for a `--mech` choice, if it implements it.
fn emit_mech(
    m: Mech,
    chunk_size: Option<u32>,
    target: Target,
) -> Option<cmm_codegen::emit::MechKind> {
    match m {
        Mech::Traditional => Some(cmm_codegen::emit::MechKind::Traditional),
        Mech::CalleeCleanup => Some(cmm_codegen::emit::MechKind::CalleeCleanup),
        Mech::Lookahead => Some(cmm_codegen::emit::MechKind::Lookahead {
            chunk_size: chunk_size.unwrap_or(cmm_codegen::callgraph::DEFAULT_CHUNK_SIZE),
        }),
        Mech::Mmu | Mech::MmuReuse => Some(cmm_codegen::emit::MechKind::Mmu {
            reuse: m == Mech::MmuReuse,
            chunk_size: chunk_size.unwrap_or_else(|| {
                cmm_codegen::emit::mech::mmu::default_chunk_size(emit_target(target))
            }),
        }),
        Mech::Heap | Mech::HeapMalloc => Some(cmm_codegen::emit::MechKind::Heap {
            malloc: m == Mech::HeapMalloc,
            slab_size: chunk_size.unwrap_or(cmm_codegen::emit::mech::heap::DEFAULT_SLAB_SIZE),
        }),
        Mech::Mtss => Some(cmm_codegen::emit::MechKind::Mtss {
            page_size: chunk_size.unwrap_or(cmm_codegen::emit::mech::mtss::DEFAULT_PAGE_SIZE),
        }),
    }
}

/// The emission stage's target for a `--target` choice.
fn emit_target(t: Target) -> cmm_codegen::emit::Target {
    match t {
        Target::I686 => cmm_codegen::emit::Target::I686,
        Target::X86_64 => cmm_codegen::emit::Target::X86_64,
    }
}

/// `--emit callgraph`: the look-ahead plan of the program, as text.
fn callgraph_text(lowered: &LoweredProgram, opts: &CodegenOpts) -> Result<String, DriverError> {
    check_combination(opts)?;
    if opts.mech != Mech::Lookahead || opts.backend != Backend::Emit {
        return Err(DriverError::unsupported(format!(
            "--emit callgraph needs --mech lookahead with --backend emit, not --mech {}",
            opts.mech.name()
        )));
    }
    let chunk = opts
        .chunk_size
        .unwrap_or(cmm_codegen::callgraph::DEFAULT_CHUNK_SIZE);
    let plan =
        cmm_codegen::emit::mech::lookahead::plan_program(lowered, emit_target(opts.target), chunk)
            .map_err(|e| DriverError::failure(e.to_string()))?;
    Ok(plan.to_string())
}

/// `--emit stack-bounds`: every function's worst-case stack use, as text.
fn stack_bounds_text(lowered: &LoweredProgram, opts: &CodegenOpts) -> Result<String, DriverError> {
    check_combination(opts)?;
    if opts.backend != Backend::Emit {
        return Err(DriverError::unsupported(
            "--emit stack-bounds needs --backend emit (the native back end's frames are \
             Cranelift's)"
                .to_string(),
        ));
    }
    let emit_opts = cmm_codegen::emit::EmitOptions {
        target: emit_target(opts.target),
        mech: emit_mech(opts.mech, opts.chunk_size, opts.target)
            .ok_or_else(|| DriverError::unsupported("mechanism"))?,
    };
    let bounds = cmm_codegen::emit::bounds::stack_bounds(lowered, &emit_opts)
        .map_err(|e| DriverError::failure(e.to_string()))?;
    Ok(bounds.to_string())
}

/// Assembles the emission stage's output with the system C compiler into object bytes.
fn assemble(target: Target, asm: &str) -> Result<Vec<u8>, DriverError> {
    let dir = tempfile::Builder::new()
        .prefix("cmm-as-")
        .tempdir()
        .map_err(|e| DriverError::failure(format!("cannot create a temporary directory: {e}")))?;
    let s = dir.path().join("program.s");
    let o = dir.path().join("program.o");
    write_file(&s, asm.as_bytes())?;
    let m = if target == Target::I686 {
        "-m32"
    } else {
        "-m64"
    };
    let out = Command::new("cc")
        .args([m, "-c", "-o"])
        .arg(&o)
        .arg(&s)
        .output()
        .map_err(|e| DriverError::failure(format!("cannot run cc: {e}")))?;
    if !out.status.success() {
        return Err(DriverError::failure(format!(
            "assembling the emitted code failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    std::fs::read(&o).map_err(|e| DriverError::failure(format!("cannot read {}: {e}", o.display())))
}

fn lower(path: &Path, opts: &CodegenOpts) -> Result<LoweredProgram, DriverError> {
    let program = front_end(path, opts.target)?;
    let green = opts.threads == Threads::Green;
    // The native back end reaches thread-locals through a call; it polls the program's flag.
    let flag = (green && opts.preempt_loops).then(|| {
        if opts.backend == Backend::Native {
            cmm_codegen::lower::PollFlag::Global
        } else {
            cmm_codegen::lower::PollFlag::ThreadLocal
        }
    });
    let mut lowered = if opts.race {
        // Reports name the file as the user knows it, without the directories it was
        // compiled from (`racy.cm:16:9`).
        let src = read_source(path)?;
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        if green {
            cmm_codegen::lower::lower_program_green(&program, Some((&name, &src)), flag)
        } else {
            cmm_codegen::lower::lower_program_race(&program, &name, &src)
        }
    } else if green {
        cmm_codegen::lower::lower_program_green(&program, None, flag)
    } else {
        cmm_codegen::lower_program(&program)
    };
    if opts.threads == Threads::Green {
        cmm_codegen::lower::mark_green_threads(&mut lowered);
    }
    Ok(lowered)
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), DriverError> {
    std::fs::write(path, bytes)
        .map_err(|e| DriverError::failure(format!("cannot write {}: {e}", path.display())))
}

/// Writes text to `-o FILE`, or to stdout.
fn write_text(out: Option<&Path>, text: &str) -> Result<(), DriverError> {
    match out {
        Some(p) => write_file(p, text.as_bytes()),
        None => write_stdout(text.as_bytes()),
    }
}

fn write_stdout(bytes: &[u8]) -> Result<(), DriverError> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(bytes)
        .and_then(|()| stdout.flush())
        .map_err(|e| DriverError::failure(format!("cannot write to stdout: {e}")))
}

fn default_output(source: &Path, ext: Option<&str>) -> PathBuf {
    let stem = source
        .file_stem()
        .map_or_else(|| "a".into(), |s| s.to_os_string());
    let mut name = PathBuf::from(stem);
    if let Some(ext) = ext {
        name.set_extension(ext);
    } else if name == source.file_name().map(PathBuf::from).unwrap_or_default() {
        // `prog` (no extension) would overwrite the source: use gcc's default instead.
        name = PathBuf::from("a.out");
    }
    name
}

/// Compiles to an executable at `out` (the object goes to a temporary directory).
fn build_executable(
    lowered: &LoweredProgram,
    opts: &CodegenOpts,
    out: &Path,
) -> Result<(), DriverError> {
    let generated = generate(lowered, opts, false)?;
    let dir = tempfile::Builder::new()
        .prefix("cmm-")
        .tempdir()
        .map_err(|e| DriverError::failure(format!("cannot create a temporary directory: {e}")))?;
    let obj = dir.path().join("program.o");
    write_file(&obj, &generated.object)?;
    let mut objects = vec![obj.as_path()];
    objects.extend(opts.link.iter().map(PathBuf::as_path));
    link::link(opts.target, &objects, out)
}

/// `cmm compile`.
pub fn compile(args: &CompileArgs) -> Result<ExitCode, DriverError> {
    // `-o -`: standard output, as gcc and most tools read it (an executable cannot go there).
    let to_stdout = args.output.as_deref() == Some(Path::new("-"));
    if to_stdout && args.emit == Emit::Exe {
        return Err(DriverError::failure(
            "cannot write an executable to standard output (`-o -`); name a file, or use \
             `--emit asm|obj|clif|callgraph|stack-bounds`"
                .to_string(),
        ));
    }
    if !args.opts.link.is_empty() && args.emit != Emit::Exe {
        return Err(DriverError::failure(format!(
            "--link links C code into an executable; it does not apply to --emit {}",
            args.emit
                .to_possible_value()
                .map_or_else(String::new, |v| v.get_name().to_string())
        )));
    }
    check_link_inputs(&args.opts)?;
    let lowered = lower(&args.file, &args.opts)?;
    let out = args.output.as_deref().filter(|_| !to_stdout);
    match args.emit {
        Emit::Clif => write_text(out, &lowered.to_clif())?,
        Emit::Callgraph => write_text(out, &callgraph_text(&lowered, &args.opts)?)?,
        Emit::StackBounds => write_text(out, &stack_bounds_text(&lowered, &args.opts)?)?,
        Emit::Asm => {
            let generated = generate(&lowered, &args.opts, true)?;
            write_text(out, generated.asm.as_deref().unwrap_or(""))?;
        }
        Emit::Obj => {
            let generated = generate(&lowered, &args.opts, false)?;
            if to_stdout {
                write_stdout(&generated.object)?;
            } else {
                let path =
                    out.map_or_else(|| default_output(&args.file, Some("o")), Path::to_path_buf);
                write_file(&path, &generated.object)?;
            }
        }
        Emit::Exe => {
            let path = out.map_or_else(|| default_output(&args.file, None), Path::to_path_buf);
            build_executable(&lowered, &args.opts, &path)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The files of `--link` exist (before anything is compiled, so that a typo costs no build
/// and gets its own line rather than the C compiler's).
fn check_link_inputs(opts: &CodegenOpts) -> Result<(), DriverError> {
    for file in &opts.link {
        if let Err(e) = std::fs::metadata(file) {
            return Err(DriverError::failure(format!(
                "cannot read '{}' given to --link: {e}",
                file.display()
            )));
        }
    }
    Ok(())
}

/// `cmm run`.
pub fn run(args: &RunArgs) -> Result<ExitCode, DriverError> {
    check_link_inputs(&args.opts)?;
    let lowered = lower(&args.file, &args.opts)?;
    let dir = tempfile::Builder::new()
        .prefix("cmm-run-")
        .tempdir()
        .map_err(|e| DriverError::failure(format!("cannot create a temporary directory: {e}")))?;
    let exe = dir.path().join(default_output(&args.file, None));
    build_executable(&lowered, &args.opts, &exe)?;
    let status = Command::new(&exe)
        .args(&args.args)
        .status()
        .map_err(|e| DriverError::failure(format!("cannot run {}: {e}", exe.display())))?;
    drop(dir);
    if let Some(code) = status.code() {
        // Exit statuses are 0..=255 on Linux.
        return Ok(ExitCode::from(code as u8));
    }
    use std::os::unix::process::ExitStatusExt as _;
    let sig = status.signal().unwrap_or(0);
    eprintln!(
        "cmm: program terminated by signal {sig} ({})",
        signal_name(sig)
    );
    Ok(ExitCode::from((128 + sig).clamp(0, 255) as u8))
}

/// The conventional name of a Linux signal number.
pub fn signal_name(sig: i32) -> String {
    const NAMES: [&str; 32] = [
        "",
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    match usize::try_from(sig).ok().and_then(|i| NAMES.get(i)) {
        Some(n) if !n.is_empty() => (*n).to_string(),
        _ if (34..=64).contains(&sig) => format!("SIGRTMIN+{}", sig - 34),
        _ => "unknown signal".to_string(),
    }
}
