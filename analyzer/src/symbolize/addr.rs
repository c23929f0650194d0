//! The three address spaces a symbolizer deals in, as distinct types (samply's
//! AVMA/SVMA and gimli's typed offsets): a runtime address in a process, an offset in a
//! mapped file, and an address as the ELF file states it. Converting between them takes
//! the mapping (runtime -> file offset) or the file's segments (file offset -> ELF
//! address), so one cannot be used where another belongs.

/// An actual virtual memory address: where something sat in the sampled process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Avma(pub u64);

/// An offset into a mapped file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FileOffset(pub u64);

/// A stated virtual memory address: an address as the ELF file's symbols, segments and
/// DWARF give it (before the loader placed the file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Svma(pub u64);

/// A file mapping's runtime range and the file offset it starts at.
pub trait MappedRange {
    /// The file offset of `a`, if `a` lies in the mapping.
    fn file_offset(&self, a: Avma) -> Option<FileOffset>;
}

impl MappedRange for collector::records::Mapping {
    fn file_offset(&self, a: Avma) -> Option<FileOffset> {
        (a.0 >= self.start && a.0 - self.start < self.len).then(|| FileOffset(a.0 - self.start + self.pgoff))
    }
}
