//! The program interpreter (ELF loader) of the interpreter a child runs: the sandbox must let
//! the child execute it too. Read from the first bytes of the executable only, hostile headers
//! answered with an error, never a panic.

use std::path::{Path, PathBuf};

/// Bytes read from the head of an executable to find its program interpreter. Linkers put the
/// ELF header, the program headers and `PT_INTERP` in the first page (`PT_PHDR` must lie in the
/// first loaded segment); an executable whose headers lie past this is refused, so the host never
/// reads more of it (Node.js is some 100 MiB).
const ELF_HEAD_BYTES: u64 = 64 << 10;

/// The longest program interpreter path accepted, `PATH_MAX` with its NUL.
const MAX_INTERP_BYTES: u64 = 4096;

/// The program interpreter (`PT_INTERP`, e.g. `/lib64/ld-linux-x86-64.so.2`) of an ELF
/// executable (32 or 64 bits, either byte order), canonicalized: the sandbox must let the child
/// execute it too. `Ok(None)` for a file that is not ELF or has no interpreter (static). Reads at
/// most [`ELF_HEAD_BYTES`] of the file.
///
/// # Errors
/// The reason, for a file that cannot be read, an ELF file whose headers are malformed or lie
/// past [`ELF_HEAD_BYTES`], or an interpreter path that is too long, not UTF-8 or names no file.
pub(super) fn elf_loader(executable: &Path) -> Result<Option<PathBuf>, String> {
    use std::io::Read;
    let mut head = Vec::new();
    std::fs::File::open(executable)
        .and_then(|file| file.take(ELF_HEAD_BYTES).read_to_end(&mut head))
        .map_err(|err| format!("cannot be read: {err}"))?;
    if !head.starts_with(&object::elf::ELFMAG) {
        return Ok(None);
    }
    // `e_ident[EI_CLASS]`, the byte after the magic: 32 or 64 bits.
    match head.get(4).copied() {
        Some(object::elf::ELFCLASS64) => {
            program_interpreter::<object::elf::FileHeader64<object::Endianness>>(&head)
        }
        Some(object::elf::ELFCLASS32) => {
            program_interpreter::<object::elf::FileHeader32<object::Endianness>>(&head)
        }
        _ => Err("is an ELF file of no known class".to_owned()),
    }
}

/// [`elf_loader`] for the ELF header type `Elf`, on the file's first bytes `head`.
fn program_interpreter<Elf>(head: &[u8]) -> Result<Option<PathBuf>, String>
where
    Elf: object::read::elf::FileHeader<Endian = object::Endianness>,
{
    use object::read::elf::ProgramHeader;
    let malformed = |err: object::read::Error| {
        format!(
            "has ELF headers that are malformed or past its first {ELF_HEAD_BYTES} bytes: {err}"
        )
    };
    let header = Elf::parse(head).map_err(malformed)?;
    let endian = header.endian().map_err(malformed)?;
    for segment in header.program_headers(endian, head).map_err(malformed)? {
        if segment.p_type(endian) != object::elf::PT_INTERP {
            continue;
        }
        if Into::<u64>::into(segment.p_filesz(endian)) > MAX_INTERP_BYTES {
            return Err(format!(
                "names a program interpreter longer than {MAX_INTERP_BYTES} bytes"
            ));
        }
        let raw = segment
            .interpreter(endian, head)
            .map_err(malformed)?
            .unwrap_or_default();
        let path = std::str::from_utf8(raw)
            .map_err(|_| "names a program interpreter that is not UTF-8".to_owned())?;
        return std::fs::canonicalize(path).map(Some).map_err(|err| {
            format!("names the program interpreter `{path}`, which cannot be resolved: {err}")
        });
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_elf_loader_is_found() {
        let loader = elf_loader(Path::new("/proc/self/exe")).unwrap();
        assert!(loader.is_some_and(|p| p.exists()));
    }

    /// A little-endian ELF64 executable head: the 64-byte header, then `phnum` program headers
    /// of 56 bytes at offset 64, each `(p_type, p_offset, p_filesz)`.
    fn elf64(segments: &[(u32, u64, u64)], phoff: u64, phnum: u16) -> Vec<u8> {
        let mut bytes = vec![0u8; 64];
        bytes[..8].copy_from_slice(b"\x7fELF\x02\x01\x01\x00");
        bytes[16..18].copy_from_slice(&2u16.to_le_bytes()); // ET_EXEC
        bytes[18..20].copy_from_slice(&62u16.to_le_bytes()); // EM_X86_64
        bytes[20..24].copy_from_slice(&1u32.to_le_bytes());
        bytes[32..40].copy_from_slice(&phoff.to_le_bytes());
        bytes[52..54].copy_from_slice(&64u16.to_le_bytes());
        bytes[54..56].copy_from_slice(&56u16.to_le_bytes());
        bytes[56..58].copy_from_slice(&phnum.to_le_bytes());
        for &(p_type, offset, size) in segments {
            let mut header = vec![0u8; 56];
            header[..4].copy_from_slice(&p_type.to_le_bytes());
            header[8..16].copy_from_slice(&offset.to_le_bytes());
            header[32..40].copy_from_slice(&size.to_le_bytes());
            bytes.extend(header);
        }
        bytes
    }

    fn loader_of(bytes: &[u8]) -> Result<Option<PathBuf>, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("exe");
        std::fs::write(&path, bytes).unwrap();
        elf_loader(&path)
    }

    #[test]
    fn the_elf_loader_is_read_from_the_head_of_the_file() {
        let mut exe = elf64(&[(3, 120, 10)], 64, 1);
        exe.extend(b"/dev/null\0");
        assert_eq!(loader_of(&exe), Ok(Some(PathBuf::from("/dev/null"))));
        // Static, or not ELF at all: no loader.
        assert_eq!(loader_of(&elf64(&[(1, 0, 0)], 64, 1)), Ok(None));
        assert_eq!(loader_of(b"#!/bin/sh\n"), Ok(None));
        assert_eq!(loader_of(b""), Ok(None));
        // An interpreter past the head is refused, whatever the file's size: it is never read.
        let mut far = elf64(&[(3, ELF_HEAD_BYTES + 8, 10)], 64, 1);
        far.resize(usize::try_from(ELF_HEAD_BYTES).unwrap() + 8, 0);
        far.extend(b"/dev/null\0");
        assert!(loader_of(&far).is_err());
    }

    #[test]
    fn hostile_elf_headers_are_errors_not_panics() {
        let cases: Vec<Vec<u8>> = vec![
            // Truncated header, unknown class.
            b"\x7fELF\x02\x01".to_vec(),
            b"\x7fELF\x07\x01\x01\x00".to_vec(),
            // Program headers at an offset that overflows, or past the file.
            elf64(&[], u64::MAX - 8, 2),
            elf64(&[], 64, u16::MAX - 1),
            // An interpreter whose offset plus size overflows, past the file, too long, without
            // its NUL, not UTF-8, naming no file.
            elf64(&[(3, u64::MAX - 1, 16)], 64, 1),
            elf64(&[(3, 120, 1 << 40)], 64, 1),
            elf64(&[(3, 120, MAX_INTERP_BYTES + 1)], 64, 1),
            [elf64(&[(3, 120, 3)], 64, 1), b"/a/".to_vec()].concat(),
            [elf64(&[(3, 120, 3)], 64, 1), b"\xff\xfe\0".to_vec()].concat(),
            [elf64(&[(3, 120, 9)], 64, 1), b"/nowhere\0".to_vec()].concat(),
        ];
        for (i, case) in cases.iter().enumerate() {
            assert!(loader_of(case).is_err(), "case {i}: {:?}", loader_of(case));
        }
    }
}
