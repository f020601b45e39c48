//! The processes below one process, through the kernel's `children` lists.

/// Every live process below `root` (not `root`), read from `/proc/<pid>/task/<tid>/children`
/// of `root` and of each process found: the cost follows the tree's size, never the host's
/// (unlike a scan of `/proc`). A process that exits meanwhile is simply not listed.
pub fn below(root: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { continue };
        for task in tasks.flatten() {
            let Ok(children) = std::fs::read_to_string(task.path().join("children")) else { continue };
            for child in children.split_whitespace().filter_map(|c| c.parse::<i32>().ok()) {
                if !out.contains(&child) {
                    out.push(child);
                    todo.push(child);
                }
            }
        }
    }
    out
}
