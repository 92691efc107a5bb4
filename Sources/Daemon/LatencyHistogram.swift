import Answering

/// Time from receiving a request to sending its answer, in fixed buckets,
/// one histogram per transport, written by one thread.
///
/// Workers take one timestamp when a batch (a recvmmsg, or a read on a TCP
/// connection) arrives and one when its answers are sent, and count every
/// answer of the batch with that duration: two clock reads per batch, not
/// per request, at the price of charging each request its batch's whole time.
///
/// Threading: one writer (its worker, or the HTTP thread for `.http`), any reader.
final class LatencyHistogram: @unchecked Sendable {
    enum Transport: Int, CaseIterable { case udp, tcp, http }
    /// Upper bounds in nanoseconds (10 µs ... 1 s); one more slot for +Inf.
    static let bounds: [UInt64] = [10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000,
                                   5_000_000, 10_000_000, 25_000_000, 50_000_000, 100_000_000, 250_000_000,
                                   500_000_000, 1_000_000_000]
    /// Per transport: the buckets, +Inf, count, sum of nanoseconds.
    private static let stride = bounds.count + 3
    private let block = CounterBlock(count: Transport.allCases.count * LatencyHistogram.stride)

    @inline(__always)
    func observe(_ transport: Transport, nanoseconds: UInt64, count: Int = 1) {
        guard count > 0 else { return }
        let base = transport.rawValue * LatencyHistogram.stride
        var bucket = LatencyHistogram.bounds.count
        for i in LatencyHistogram.bounds.indices where nanoseconds <= LatencyHistogram.bounds[i] {
            bucket = i
            break
        }
        block.add(base + bucket, UInt64(count))
        block.add(base + LatencyHistogram.bounds.count + 1, UInt64(count))
        block.add(base + LatencyHistogram.bounds.count + 2, nanoseconds &* UInt64(count))
    }

    /// Non-cumulative bucket counts (the last is +Inf), the count and the sum in nanoseconds.
    func snapshot(_ transport: Transport) -> (buckets: [UInt64], count: UInt64, sum: UInt64) {
        let base = transport.rawValue * LatencyHistogram.stride
        let buckets = (0...LatencyHistogram.bounds.count).map { block.value(base + $0) }
        return (buckets, block.value(base + LatencyHistogram.bounds.count + 1), block.value(base + LatencyHistogram.bounds.count + 2))
    }
}
