//! The MMU fault classifier (`stackrt::mech::mmu::classify`) against a model of the rules:
//! random chunks, fault addresses, stack pointers, `si_code`s and instruction bytes (probe runs
//! built here from their distances, or bytes that are no probe); and the probe encodings
//! against the assembler (the runtime's half of the ABI contract with the compiler).

use std::process::Command;

use proptest::prelude::*;
use stackrt::mech::mmu::{
    classify, decode_run, ChunkBounds, Crash, Fault, ProbeRun, Verdict, PROBE_TEST, PROBE_WRITE_32,
    PROBE_WRITE_64, SEGV_ACCERR,
};

const PAGE: usize = 4096;

/// A probe run as the compiler emits it, with what the model knows of it.
#[derive(Clone, Debug)]
struct Run {
    bytes: Vec<u8>,
    first: usize,
    distance: usize,
    ret: Option<usize>,
}

fn encode_run(tests: &[u32], write: Option<(u32, u32)>, is64: bool) -> Run {
    let mut bytes = Vec::new();
    for d in tests {
        bytes.extend_from_slice(&PROBE_TEST);
        bytes.extend_from_slice(&(-(*d as i32)).to_le_bytes());
    }
    let mut ret = None;
    if let Some((d, imm)) = write {
        if is64 {
            bytes.push(0x48);
        }
        if d <= 128 {
            bytes.extend_from_slice(&[0xC7, 0x44, 0x24, (-(d as i32)) as i8 as u8]);
        } else {
            bytes.extend_from_slice(&[0xC7, 0x84, 0x24]);
            bytes.extend_from_slice(&(-(d as i32)).to_le_bytes());
        }
        bytes.extend_from_slice(&imm.to_le_bytes());
        ret = Some(if is64 {
            imm as i32 as i64 as usize
        } else {
            imm as usize
        });
    }
    let all: Vec<u32> = tests.iter().copied().chain(write.map(|w| w.0)).collect();
    // What follows a run: `jmp rel32` (a C-- call) or anything but a probe.
    bytes.push(0xE9);
    Run {
        first: all[0] as usize,
        distance: *all.iter().max().unwrap() as usize,
        ret,
        bytes,
    }
}

fn arb_run(is64: bool) -> impl Strategy<Value = Run> {
    (
        prop::collection::vec(1u32..=(1 << 20), 0..6),
        prop::option::of((1u32..=(1 << 20), any::<u32>())),
    )
        .prop_filter("a run has a probe", |(t, w)| !t.is_empty() || w.is_some())
        .prop_map(move |(t, w)| {
            // x86-64 return addresses are below 2 GiB (sign-extended imm32 of a -no-pie text).
            let w = w.map(|(d, imm)| (d, if is64 { imm & 0x7fff_ffff } else { imm }));
            encode_run(&t, w, is64)
        })
}

/// Instruction bytes that start no probe (first byte never a probe's first byte).
fn arb_other() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 1..16)
        .prop_filter("not a probe", |b| ![0x85, 0xC7, 0x48].contains(&b[0]))
}

#[derive(Clone, Debug)]
struct Case {
    is64: bool,
    chunk: Option<ChunkBounds>,
    code_kind: Result<Run, Vec<u8>>,
    fault: Fault,
}

fn arb_case() -> impl Strategy<Value = Case> {
    any::<bool>().prop_flat_map(|is64| {
        let code = prop_oneof![
            3 => arb_run(is64).prop_map(Ok),
            1 => arb_other().prop_map(Err),
        ];
        (
            Just(is64),
            prop::option::of((1usize..0x8000, 1usize..64, prop::bool::weighted(0.9))),
            code,
            prop_oneof![4 => Just(SEGV_ACCERR), 1 => Just(1)],
            // sp: an offset from the chunk's limit (may be outside it)
            -(1i64 << 16)..(1i64 << 23),
            // addr: consistent with the probe, or an offset from the limit
            prop::option::of(-(1i64 << 14)..(1i64 << 14)),
        )
            .prop_map(|(is64, chunk, code_kind, code, sp_off, addr_off)| {
                let chunk = chunk.map(|(base_page, pages, guarded)| {
                    let limit = (base_page + 1024) * PAGE;
                    ChunkBounds {
                        limit,
                        header: limit + pages * PAGE - 64,
                        guard: if guarded { PAGE } else { 0 },
                    }
                });
                let limit = chunk.map_or(0x1000_0000, |c| c.limit) as i64;
                let sp = (limit + sp_off).max(0) as usize;
                let first = code_kind.as_ref().map_or(8, |r| r.first);
                let addr = match addr_off {
                    None => sp.wrapping_sub(first),
                    Some(o) => (limit + o).max(0) as usize,
                };
                Case {
                    is64,
                    chunk,
                    code_kind,
                    fault: Fault { code, addr, sp },
                }
            })
    })
}

/// The rules of `stackrt::mech::mmu` (module docs), written out independently.
fn model(c: &Case) -> Verdict {
    let Some(ch) = c.chunk else {
        return Verdict::Crash(Crash::NotChunked);
    };
    if c.fault.code != 2 {
        return Verdict::Crash(Crash::NotAccessError);
    }
    let in_guard = ch.guard > 0 && c.fault.addr < ch.limit && c.fault.addr + ch.guard >= ch.limit;
    if !in_guard {
        return Verdict::Crash(Crash::OutsideGuard);
    }
    if !(ch.limit..=ch.header).contains(&c.fault.sp) {
        return Verdict::Crash(Crash::StackPointerOutside);
    }
    match &c.code_kind {
        Ok(run) if c.fault.sp >= run.first && c.fault.sp - run.first == c.fault.addr => {
            Verdict::Grow(ProbeRun {
                first: run.first,
                distance: run.distance,
                ret: run.ret,
                len: run.bytes.len() - 1,
            })
        }
        _ => Verdict::Crash(Crash::NotAProbe),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn classify_follows_the_rules(c in arb_case()) {
        let bytes = match &c.code_kind {
            Ok(r) => r.bytes.clone(),
            Err(b) => b.clone(),
        };
        // A reader that fails the test if the classifier reads past the run (or the bytes).
        let n = bytes.len();
        let read = |i: usize| {
            assert!(i < n, "read byte {i} of {n}");
            bytes[i]
        };
        prop_assert_eq!(classify(&c.fault, c.chunk, read, c.is64), model(&c));
    }
}

/// Assembles `lines` (Intel syntax) for the target with the system C compiler and returns the
/// bytes of `.text`.
fn assemble(lines: &str, is64: bool) -> Vec<u8> {
    let dir = tempfile_dir();
    let s = dir.join("p.s");
    let o = dir.join("p.o");
    let bin = dir.join("p.bin");
    std::fs::write(&s, format!("\t.intel_syntax noprefix\n\t.text\n{lines}\n")).unwrap();
    let m = if is64 { "-m64" } else { "-m32" };
    let st = Command::new("cc")
        .args([m, "-c", "-o"])
        .arg(&o)
        .arg(&s)
        .status()
        .unwrap();
    assert!(st.success());
    let st = Command::new("objcopy")
        .args(["-O", "binary", "--only-section=.text"])
        .arg(&o)
        .arg(&bin)
        .status()
        .unwrap();
    assert!(st.success());
    let b = std::fs::read(&bin).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    b
}

fn tempfile_dir() -> std::path::PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let d = std::env::temp_dir().join(format!(
        "stackrt-probe-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn the_probe_encodings_are_what_the_assembler_makes() {
    // The instructions the compiler prints (cmm_codegen::emit::mech::mmu), decoded here.
    for is64 in [false, true] {
        let (sp, word) = if is64 {
            ("rsp", "qword")
        } else {
            ("esp", "dword")
        };
        let text = format!(
            "\ttest dword ptr [{sp} - 4096], esp\n\ttest dword ptr [{sp} - 8192], esp\n\
             \tmov {word} ptr [{sp} - 8200], 0x401000\n\tnop\n"
        );
        let b = assemble(&text, is64);
        assert_eq!(&b[..3], &PROBE_TEST);
        let run = decode_run(|i| b[i], is64).unwrap();
        assert_eq!(
            run,
            ProbeRun {
                first: 4096,
                distance: 8200,
                ret: Some(0x401000),
                len: b.len() - 1
            }
        );
        let small = assemble(
            &format!("\tmov {word} ptr [{sp} - 32], 0x401000\n\tnop\n"),
            is64,
        );
        if is64 {
            assert_eq!(&small[..4], &PROBE_WRITE_64[0]);
        } else {
            assert_eq!(&small[..3], &PROBE_WRITE_32[0]);
        }
        let run = decode_run(|i| small[i], is64).unwrap();
        assert_eq!(
            (run.first, run.ret, run.len),
            (32, Some(0x401000), small.len() - 1)
        );
        let large = assemble(
            &format!("\tmov {word} ptr [{sp} - 40000], 0x401000\n"),
            is64,
        );
        if is64 {
            assert_eq!(&large[..4], &PROBE_WRITE_64[1]);
        } else {
            assert_eq!(&large[..3], &PROBE_WRITE_32[1]);
        }
    }
}
