import Testing

/// Every process-level test hangs under this suite so that they run one at a time: they share
/// two cores, sound servers and timing-sensitive measurements.
@Suite("keepalived as a process", .serialized)
struct Integration {}
