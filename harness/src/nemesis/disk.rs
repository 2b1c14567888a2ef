//! Disk faults: power loss and truncate-log on a stopped node (filled in next).
