//! Network partitions through the proxies (filled in next).
