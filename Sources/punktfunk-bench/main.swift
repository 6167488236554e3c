// The punktfunk data-plane benchmark driver, run by `scripts/bench punktfunk-dataplane` (see
// scripts/lib/bench/punktfunk.sh). Not a user command.
//
// 1. Builds a stream of access units the size of 1080p60 (about 50 Mbit/s) and 4K60 (about
//    150 Mbit/s) HEVC — an IDR then P-frames of varying size; the bytes are random, which the
//    data plane cannot tell from video — and cuts it as the host does (AES-128-GCM sealed,
//    1408-byte shards, 200 data shards per block, 20 % FEC).
// 2. For each loss rate, drops datagrams at random (fixed seed) and replays the rest through
//    VideoReceiver on this one thread — open, replay check, reassembly, FEC — timing thread CPU.
// 3. Times our FEC decode alone on exactly the blocks that needed it, and writes those blocks to a
//    file so the reed-solomon-leopard oracle can decode the same ones (scripts/lib/bench/
//    punktfunk_oracle.py).
// Prints one JSON object per loss rate on stdout.
#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Punktfunk

func threadSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

func wallSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

struct Rng {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

var arguments = CommandLine.arguments.dropFirst()
var losses: [Double] = [0, 1, 5]
var minSeconds = 2.0
var blocksDirectory: String?
var seconds = 2
while let a = arguments.popFirst() {
    switch a {
    case "--loss": losses = (arguments.popFirst() ?? "").split(separator: ",").compactMap { Double($0) }
    case "--min-seconds": minSeconds = Double(arguments.popFirst() ?? "") ?? minSeconds
    case "--stream-seconds": seconds = Int(arguments.popFirst() ?? "") ?? seconds
    case "--blocks-dir": blocksDirectory = arguments.popFirst()
    default:
        FileHandle.standardError.write(Data("usage: punktfunk-bench [--loss 0,1,5] [--min-seconds S] [--stream-seconds N] [--blocks-dir DIR]\n".utf8))
        exit(2)
    }
}

let shardBytes = 1408, k = 200, fecPercent = 20
let key = try DatagramKey(cipher: .aes128GCM, key: (0..<16).map { UInt8($0 * 7 + 1) }, salt: [1, 2, 3, 4])
let packetizer = try VideoPacketizer(key: key, shardBytes: shardBytes, maxDataShardsPerBlock: k, fecPercent: fecPercent)

// The recorded stream: all datagrams back to back, with their offsets and each frame's arrival time.
var wire: [UInt8] = []
var offsets: [Int] = [0]
var arrival: [UInt64] = []
var rng = Rng(state: 2026)
var auBytes = 0, auCount = 0
for (mbps, label) in [(50.0, "1080p60"), (150.0, "4K60")] {
    _ = label
    let mean = Int(mbps * 1e6 / 8 / 60)
    for n in 0..<(60 * seconds) {
        let jitter = Double(rng.next() % 600) / 1000 + 0.7          // 0.7…1.3 of the mean
        let size = n == 0 ? mean * 5 : Int(Double(mean) * jitter)
        var au = [UInt8](repeating: 0, count: size)
        au.withUnsafeMutableBytes { raw in
            var r = Rng(state: UInt64(auCount))
            var i = 0
            while i + 8 <= size { raw.storeBytes(of: r.next(), toByteOffset: i, as: UInt64.self); i += 8 }
        }
        let pts = UInt64(auCount) * 16_666_667
        try au.withUnsafeBytes { raw in
            try packetizer.packetize(raw, ptsNanoseconds: pts) { datagram in
                wire.append(contentsOf: datagram)
                offsets.append(wire.count)
                arrival.append(pts + 2_000_000)
            }
        }
        auBytes += size
        auCount += 1
    }
}
let datagramCount = offsets.count - 1
FileHandle.standardError.write(Data("stream: \(auCount) access units, \(auBytes) bytes, \(datagramCount) datagrams, \(wire.count) wire bytes\n".utf8))

let limits = VideoStreamLimits(shardBytes: shardBytes, maxDataShardsPerBlock: k)
for lossPercent in losses {
    var lossRng = Rng(state: 77 + UInt64(lossPercent * 1000))
    let threshold = UInt64(lossPercent / 100 * Double(UInt64.max))
    let kept = (0..<datagramCount).map { _ in lossPercent == 0 || lossRng.next() >= threshold }
    var keptBytes = 0
    for i in 0..<datagramCount where kept[i] { keptBytes += offsets[i + 1] - offsets[i] }

    // Full pipeline passes, one thread.
    var passRates: [Double] = []
    var wallRates: [Double] = []
    var counters = VideoReceiverCounters()
    let started = threadSeconds()
    repeat {
        let receiver = try VideoReceiver(key: key, limits: limits)
        var events: [VideoEvent] = []
        events.reserveCapacity(64)
        let t0 = threadSeconds(), w0 = wallSeconds()
        wire.withUnsafeBytes { raw in
            for i in 0..<datagramCount where kept[i] {
                receiver.receive(UnsafeRawBufferPointer(rebasing: raw[offsets[i]..<offsets[i + 1]]), at: arrival[i], into: &events)
                events.removeAll(keepingCapacity: true)
            }
        }
        let t1 = threadSeconds(), w1 = wallSeconds()
        passRates.append(Double(keptBytes) * 8 / (t1 - t0) / 1e9)
        wallRates.append(Double(keptBytes) * 8 / (w1 - w0) / 1e9)
        counters = receiver.counters
    } while threadSeconds() - started < minSeconds || passRates.count < 3
    passRates.sort()
    wallRates.sort()

    // The blocks that needed the FEC, decoded alone by our codec; written for the oracle.
    var blocks: [(k: Int, m: Int, data: [UInt8], present: [Bool], recovery: [UInt8], recoveryPresent: [Bool])] = []
    var current: [String: Int] = [:]
    do {
        let opener = try DatagramCrypto(key: key, direction: .hostToClient, sealing: false)
        var scratch = [UInt8](repeating: 0, count: 9216)
        for i in 0..<datagramCount {
            let n = offsets[i + 1] - offsets[i]
            try scratch.withUnsafeMutableBytes { s in
                let d = UnsafeMutableRawBufferPointer(rebasing: s[0..<n])
                wire.withUnsafeBytes { d.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offsets[i]..<offsets[i + 1]])) }
                _ = try opener.open(d)
            }
            let h = try VideoHeader(parsing: Array(scratch[8..<48]))
            let id = "\(h.frameIndex)/\(h.blockIndex)"
            let bk = Int(h.dataShards), bm = Int(h.recoveryShards)
            if current[id] == nil {
                current[id] = blocks.count
                blocks.append((bk, bm, [UInt8](repeating: 0, count: bk * shardBytes), [Bool](repeating: false, count: bk),
                               [UInt8](repeating: 0, count: bm * shardBytes), [Bool](repeating: false, count: bm)))
            }
            guard kept[i], let b = current[id] else { continue }
            let s = Int(h.shardIndex)
            let body = scratch[48..<(48 + shardBytes)]
            if s < bk {
                blocks[b].data.replaceSubrange((s * shardBytes)..<((s + 1) * shardBytes), with: body)
                blocks[b].present[s] = true
            } else {
                blocks[b].recovery.replaceSubrange(((s - bk) * shardBytes)..<((s - bk + 1) * shardBytes), with: body)
                blocks[b].recoveryPresent[s - bk] = true
            }
        }
    }
    let needed = blocks.filter { b in
        let have = b.present.filter { $0 }.count
        return have < b.k && have + b.recoveryPresent.filter { $0 }.count >= b.k
    }
    var fecRate = 0.0
    var neededBytes = 0
    if !needed.isEmpty {
        var codec = LeopardCodec()
        var times: [Double] = []
        for b in needed { neededBytes += b.k * shardBytes }
        repeat {
            var work = needed.map { $0.data }
            let t0 = threadSeconds()
            for (index, b) in needed.enumerated() {
                try work[index].withUnsafeMutableBytes { out in
                    try b.present.withUnsafeBufferPointer { present in
                        try b.recovery.withUnsafeBytes { rec in
                            _ = try codec.reconstruct(originals: out, originalPresent: present, originalCount: b.k, recoveryCount: b.m,
                                                      shardBytes: shardBytes,
                                                      recovery: { b.recoveryPresent[$0] ? rec.baseAddress! + $0 * shardBytes : nil })
                        }
                    }
                }
            }
            times.append(threadSeconds() - t0)
        } while times.reduce(0, +) < minSeconds / 2 || times.count < 3
        times.sort()
        fecRate = Double(neededBytes) * 8 / times[times.count / 2] / 1e9
        if let dir = blocksDirectory {
            // Binary: per block k u32, m u32, shard u32, present bitmap (k + m bytes), then the
            // present shards (data then recovery) in index order.
            var out = Data()
            func u32(_ v: Int) { var x = UInt32(v).littleEndian; withUnsafeBytes(of: &x) { out.append(contentsOf: $0) } }
            for b in needed {
                u32(b.k); u32(b.m); u32(shardBytes)
                out.append(contentsOf: b.present.map { $0 ? UInt8(1) : 0 } + b.recoveryPresent.map { $0 ? UInt8(1) : 0 })
                for s in 0..<b.k where b.present[s] { out.append(contentsOf: b.data[(s * shardBytes)..<((s + 1) * shardBytes)]) }
                for s in 0..<b.m where b.recoveryPresent[s] { out.append(contentsOf: b.recovery[(s * shardBytes)..<((s + 1) * shardBytes)]) }
            }
            try out.write(to: URL(fileURLWithPath: "\(dir)/blocks-\(lossPercent).bin"))
        }
    }

    let row: [String: Any] = [
        "loss_pct": lossPercent,
        "gbps_per_core": (passRates[passRates.count / 2] * 1000).rounded() / 1000,
        "wall_gbps": (wallRates[wallRates.count / 2] * 1000).rounded() / 1000,
        "passes": passRates.count,
        "datagrams": counters.datagrams,
        "wire_bytes": keptBytes,
        "access_units": auCount,
        "frames_completed": counters.framesCompleted,
        "frames_lost": counters.framesLost,
        "fec_recovered_shards": counters.fecRecoveredShards,
        "blocks_decoded": needed.count,
        "decoded_block_bytes": neededBytes,
        "fec_decode_gbps": (fecRate * 1000).rounded() / 1000,
    ]
    let json = try JSONSerialization.data(withJSONObject: row, options: [.sortedKeys])
    print(String(decoding: json, as: UTF8.self))
}
