//! Guest memory: physical pages, the page tables, and the user address space.

pub mod paging;
pub mod phys;
pub mod space;

pub use paging::Prot;
pub use phys::{PageAllocator, PhysError, PhysMemory};
pub use space::{
    Access, AddressSpace, Backing, HIDDEN_MAPPING, MemError, Placement, Pod, Usage, Vma,
};
