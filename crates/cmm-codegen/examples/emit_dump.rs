//! Debug helper: prints the lowered IR, the VCode and the emitted assembly of one C-- file.
use cmm_codegen::emit::{emit_program, isel, mech, EmitOptions, MechKind, Target};
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let src = std::fs::read_to_string(&args[1]).unwrap();
    let t = if args.get(2).map(String::as_str) == Some("i686") {
        Target::I686
    } else {
        Target::X86_64
    };
    let m = MechKind::from_name(args.get(3).map(String::as_str).unwrap_or("traditional")).unwrap();
    let info = if t == Target::I686 {
        cmm_front::TargetInfo::I686
    } else {
        cmm_front::TargetInfo::X86_64
    };
    let typed = cmm_front::check_rendered("x.cm", &src, info).unwrap();
    let p = cmm_codegen::lower_program(&typed);
    if std::env::var("DUMP_IR").is_ok() {
        eprintln!("{}", p.to_clif());
        for i in 0..p.functions.len() {
            eprintln!(
                "{:#?}",
                isel::lower_function(&p, i, t, mech::by_kind(m), &Default::default())
            );
        }
    }
    match emit_program(&p, &EmitOptions { target: t, mech: m }) {
        Ok(s) => print!("{s}"),
        Err(e) => eprintln!("{e}"),
    }
}
