fn main() {
    nri_wasm_guest::build::export_allocator();
}
