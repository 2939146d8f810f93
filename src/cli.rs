//! Command-line interface of `cmm` (clap derive): subcommands, options and their help texts.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Compiler for C--, a C subset, with pluggable call-stack mechanisms.
#[derive(Debug, Parser)]
#[command(name = "cmm", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Compile a C-- file to an executable (or an object file, assembly or Cranelift IR).
    Compile(CompileArgs),
    /// Compile a C-- file to a temporary executable, run it and exit with its status.
    ///
    /// The program's standard streams are the ones of `cmm`. A program killed by a signal makes
    /// `cmm` print "cmm: program terminated by signal N (NAME)" and exit with 128+N.
    Run(RunArgs),
    /// Check a C-- file (parse and type-check it) without generating code.
    Check(CheckArgs),
}

/// What `cmm compile` produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Emit {
    /// A linked executable (default output name: the source file's name without extension).
    Exe,
    /// A relocatable object file (default output name: `<stem>.o`).
    Obj,
    /// Assembly text (the native back end prints Cranelift's disassembly); default: stdout.
    Asm,
    /// The Cranelift IR of every function, as text; default: stdout.
    Clif,
    /// The look-ahead call-graph plan (frames, longest paths, checkpoints and their
    /// reserves); needs `--mech lookahead`; default: stdout.
    Callgraph,
    /// Every function's worst-case stack use in bytes under the chosen target and mechanism,
    /// or `unbounded` with the call-graph cycle that makes it so; needs `--backend emit`;
    /// default: stdout.
    StackBounds,
}

/// The architecture to generate code for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Target {
    /// 64-bit x86 (System V, `cc -m64`).
    #[value(name = "x86_64")]
    X86_64,
    /// 32-bit x86 (System V i386, `cc -m32`; needs gcc-multilib).
    I686,
}

/// How the call stack is managed (thesis section 3.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mech {
    /// One fixed-size contiguous stack per thread, caller cleans up arguments.
    Traditional,
    /// Fixed-size stack, callee cleans up arguments.
    CalleeCleanup,
    /// Every frame in its own heap block, from per-thread free lists by size class.
    Heap,
    /// Every frame in its own heap block from malloc and free (the thesis's heap variant).
    HeapMalloc,
    /// Stack chunks, the caller checks ahead for room.
    Lookahead,
    /// Stack chunks grown on guard-page faults.
    Mmu,
    /// Stack chunks grown on guard-page faults, freed chunks reused.
    MmuReuse,
    /// Multi-task stack sharing: a check at every procedure entry; an overflowing stack grows
    /// in pages (`--chunk-size`, default 128 bytes) into other threads' free stack space.
    Mtss,
}

/// Which code generator to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// Cranelift's own x86-64 back end (System V calls; traditional mechanism only).
    Native,
    /// The cmm emission stage (i686 and x86-64 assembly with mechanism sequences).
    Emit,
}

/// Options shared by `compile` and `run`.
#[derive(Clone, Debug, Args)]
pub struct CodegenOpts {
    /// Target architecture.
    #[arg(long, value_enum, default_value = "x86_64")]
    pub target: Target,
    /// Call-stack mechanism.
    #[arg(long, value_enum, default_value = "traditional")]
    pub mech: Mech,
    /// Code generator.
    #[arg(long, value_enum, default_value = "emit")]
    pub backend: Backend,
    /// Size of a stack chunk in bytes (chunked mechanisms: lookahead, mmu, mmu-reuse; under
    /// heap and heap-malloc the slab that frames are carved from; under mtss the page an
    /// overflowing stack grows by, a power of two from 16 to 65536, default 128).
    #[arg(long, value_name = "BYTES")]
    pub chunk_size: Option<u32>,
    /// How `sthread_*` threads run: one OS thread each, or green threads (M:N) on worker OS
    /// threads (`STACKRT_WORKERS`, default one per CPU).
    #[arg(long, value_enum, default_value = "os")]
    pub threads: Threads,
    /// Instrument every access that may touch memory shared between threads and report data
    /// races at run time (`STACKRT_RACE=abort` stops at the first with status 66).
    #[arg(long)]
    pub race: bool,
    /// With `--threads green`: poll for preemption at the head of every loop, so that a loop
    /// without calls cannot keep its worker for ever. Off by default: the poll's load and
    /// branch cost the tightest loops (Real World's counting loop ran 1.2-1.3 times as long).
    #[arg(long)]
    pub preempt_loops: bool,
    /// C code to link into the executable (repeatable): C sources, objects or archives, given
    /// to the C compiler (`$CC`, else `cc`) with the target's `-m64`/`-m32`. The program
    /// declares their functions `extern`; calls to them are C calls under every mechanism.
    #[arg(long = "link", value_name = "FILE")]
    pub link: Vec<PathBuf>,
    /// For measuring: moves all of the program's code BYTES further into its section (the
    /// emission stage pads the start of the text with `nop`s). A build's speed depends on where
    /// its loops and branches happen to fall (by 4-13% on this project's workloads when the code
    /// moves by 16-112 bytes), so compare builds at several offsets and average their ratios.
    #[arg(long, value_name = "BYTES", default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=65536))]
    pub text_offset: u32,
}

/// How the thread library runs threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Threads {
    /// One OS thread (pthread) per thread.
    Os,
    /// Green threads on worker OS threads, with work stealing (every mechanism and the
    /// native back end).
    Green,
}

#[derive(Debug, Args)]
pub struct CompileArgs {
    /// The C-- source file.
    pub file: PathBuf,
    /// Output file (`-`: standard output, for every `--emit` but `exe`).
    #[arg(short, long, value_name = "OUT")]
    pub output: Option<PathBuf>,
    /// What to produce.
    #[arg(long, value_enum, default_value = "exe")]
    pub emit: Emit,
    #[command(flatten)]
    pub opts: CodegenOpts,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The C-- source file.
    pub file: PathBuf,
    #[command(flatten)]
    pub opts: CodegenOpts,
    /// Arguments passed to the program (after `--`).
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<OsString>,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The C-- source file.
    pub file: PathBuf,
    /// Target architecture (type sizes and struct layout depend on it).
    #[arg(long, value_enum, default_value = "x86_64")]
    pub target: Target,
}

impl Target {
    pub fn info(self) -> cmm_front::TargetInfo {
        match self {
            Target::X86_64 => cmm_front::TargetInfo::X86_64,
            Target::I686 => cmm_front::TargetInfo::I686,
        }
    }
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Target::X86_64 => "x86_64",
            Target::I686 => "i686",
        }
    }
}

impl Mech {
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mech::Traditional => "traditional",
            Mech::CalleeCleanup => "callee-cleanup",
            Mech::Heap => "heap",
            Mech::HeapMalloc => "heap-malloc",
            Mech::Lookahead => "lookahead",
            Mech::Mmu => "mmu",
            Mech::MmuReuse => "mmu-reuse",
            Mech::Mtss => "mtss",
        }
    }
    /// True for the mechanisms that run on stack chunks (and so take `--chunk-size`).
    pub fn is_chunked(self) -> bool {
        matches!(
            self,
            Mech::Heap
                | Mech::HeapMalloc
                | Mech::Lookahead
                | Mech::Mmu
                | Mech::MmuReuse
                | Mech::Mtss
        )
    }
}
