/// The Sendspin time filter: a two-state Kalman filter (offset and drift of the server clock
/// relative to the client's) with adaptive forgetting, as specified by Sendspin/time-filter and
/// implemented by aiosendspin's `SendspinTimeFilter`.
///
/// The arithmetic follows the reference operation for operation (including multiplying by the
/// reciprocal of the innovation variance and computing the drift process variance as
/// 1e-11 · 1e-11), so a replayed sequence gives bit-identical offsets and drifts. Times are
/// integer microseconds; offset is server − client.
public struct TimeFilter: Sendable, Equatable {
    public struct Parameters: Sendable, Equatable {
        /// Random-walk standard deviation of the offset, per µs.
        public var processStdDev: Double = 0.0
        /// Covariance multiplier applied (squared) when a residual exceeds the cutoff.
        public var forgetFactor: Double = 2.0
        /// Random-walk standard deviation of the drift, per µs.
        public var driftProcessStdDev: Double = 1e-11

        public init(processStdDev: Double = 0.0, forgetFactor: Double = 2.0, driftProcessStdDev: Double = 1e-11) {
            self.processStdDev = processStdDev
            self.forgetFactor = forgetFactor
            self.driftProcessStdDev = driftProcessStdDev
        }
    }

    /// Residuals beyond this many times the measurement's max error trigger forgetting.
    static let adaptiveCutoff = 3.0
    /// Measurement standard deviation = this × max error.
    static let maxErrorScale = 0.5
    /// Drift is used once drift² exceeds this × its variance (two standard deviations).
    static let driftSignificanceSquared = 4.0
    /// Forgetting only starts after this many accepted samples.
    static let minimumSamplesBeforeForgetting = 100

    public let parameters: Parameters
    private let processVariance: Double
    private let driftProcessVariance: Double
    private let forgetVarianceFactor: Double

    public private(set) var count = 0
    public private(set) var lastUpdate: Int64 = 0
    public private(set) var offset = 0.0
    public private(set) var drift = 0.0
    public private(set) var offsetCovariance = Double.infinity
    public private(set) var offsetDriftCovariance = 0.0
    public private(set) var driftCovariance = 0.0
    public private(set) var useDrift = false

    /// The state conversions use: a snapshot taken at each update.
    private var snapshot = Snapshot(lastUpdate: 0, offset: 0, drift: 0, useDrift: false)

    struct Snapshot: Sendable, Equatable {
        var lastUpdate: Int64
        var offset: Double
        var drift: Double
        var useDrift: Bool
    }

    public init(parameters: Parameters = Parameters()) {
        self.parameters = parameters
        processVariance = parameters.processStdDev * parameters.processStdDev
        driftProcessVariance = parameters.driftProcessStdDev * parameters.driftProcessStdDev
        forgetVarianceFactor = parameters.forgetFactor * parameters.forgetFactor
    }

    /// Forgets everything (a new connection, a server clock change).
    public mutating func reset() {
        self = TimeFilter(parameters: parameters)
    }

    /// Feeds one measurement: `measurement` = offset estimate (µs), `maxError` = its half
    /// round-trip bound (µs), `time` = client time of the measurement (µs). Measurements at or
    /// before the last one are ignored.
    public mutating func update(measurement z: Int64, maxError e: Int64, time t: Int64) {
        guard t > lastUpdate else { return }
        let dt = Double(t - lastUpdate)
        lastUpdate = t
        let std = Double(e) * Self.maxErrorScale
        let measurementVariance = std * std
        let measured = Double(z)

        if count <= 0 {
            count += 1
            offset = measured
            offsetCovariance = measurementVariance
            drift = 0.0
            snapshot = Snapshot(lastUpdate: t, offset: offset, drift: drift, useDrift: false)
            return
        }
        if count == 1 {
            count += 1
            drift = (measured - offset) / dt
            offset = measured
            driftCovariance = (offsetCovariance + measurementVariance) / (dt * dt)
            offsetCovariance = measurementVariance
            snapshot = Snapshot(lastUpdate: t, offset: offset, drift: drift, useDrift: false)
            return
        }

        // Predict.
        let predictedOffset = offset + drift * dt
        let dt2 = dt * dt
        let driftProcess = dt * driftProcessVariance
        var predictedDriftCov = driftCovariance + driftProcess
        var predictedOffsetDriftCov = (offsetDriftCovariance + driftCovariance * dt) + 0.0
        var predictedOffsetCov = ((offsetCovariance + (2 * offsetDriftCovariance) * dt) + driftCovariance * dt2) + dt * processVariance

        // Adaptive forgetting once the filter has settled.
        let residual = measured - predictedOffset
        let cutoff = Double(e) * Self.adaptiveCutoff
        if count < Self.minimumSamplesBeforeForgetting {
            count += 1
        } else if abs(residual) > cutoff {
            predictedDriftCov *= forgetVarianceFactor
            predictedOffsetDriftCov *= forgetVarianceFactor
            predictedOffsetCov *= forgetVarianceFactor
        }

        // Correct.
        let u = 1.0 / max(predictedOffsetCov + measurementVariance, 1e-9)
        let offsetGain = predictedOffsetCov * u
        let driftGain = predictedOffsetDriftCov * u
        offset = predictedOffset + offsetGain * residual
        drift = drift + driftGain * residual
        driftCovariance = predictedDriftCov - driftGain * predictedOffsetDriftCov
        offsetDriftCovariance = predictedOffsetDriftCov - driftGain * predictedOffsetCov
        offsetCovariance = predictedOffsetCov - offsetGain * predictedOffsetCov
        useDrift = drift * drift > Self.driftSignificanceSquared * driftCovariance
        snapshot = Snapshot(lastUpdate: t, offset: offset, drift: drift, useDrift: useDrift)
    }

    /// Feeds one NTP-style exchange: T1 client send, T2 server receive, T3 server send, T4
    /// client receive (µs). Offset and max error are rounded half to even, as the reference does.
    public mutating func update(t1: Int64, t2: Int64, t3: Int64, t4: Int64) {
        let (z, e) = Self.measurement(t1: t1, t2: t2, t3: t3, t4: t4)
        update(measurement: z, maxError: e, time: t4)
    }

    /// The offset estimate and max error of an exchange.
    public static func measurement(t1: Int64, t2: Int64, t3: Int64, t4: Int64) -> (offset: Int64, maxError: Int64) {
        let zNumerator = (t2 - t1) + (t3 - t4)
        let eNumerator = (t4 - t1) - (t3 - t2)
        return (halfRoundedToEven(zNumerator), halfRoundedToEven(eNumerator))
    }

    /// n / 2 rounded half to even, exactly (Python's round(n / 2) for any Int64 n).
    static func halfRoundedToEven(_ n: Int64) -> Int64 {
        let q = n >> 1            // floor(n / 2)
        guard n & 1 != 0 else { return q }
        // Exactly halfway between q and q + 1: pick the even one.
        return q & 1 == 0 ? q : q + 1
    }

    /// True once two measurements have been accepted and the covariance is finite.
    public var isSynchronized: Bool { count >= 2 && offsetCovariance.isFinite }

    /// Standard deviation of the offset estimate (µs), rounded half to even; nil before the
    /// first measurement.
    public var error: Int64? {
        offsetCovariance.isFinite ? Int64(offsetCovariance.squareRoot().rounded(.toNearestOrEven)) : nil
    }

    /// Server time for a client time (µs).
    public func serverTime(forClientTime c: Int64) -> Int64 {
        let d = snapshot.useDrift ? snapshot.drift : 0.0
        return c + Int64((snapshot.offset + d * Double(c - snapshot.lastUpdate)).rounded(.toNearestOrEven))
    }

    /// Client time for a server time (µs): the inverse of `serverTime(forClientTime:)`.
    public func clientTime(forServerTime s: Int64) -> Int64 {
        let d = snapshot.useDrift ? snapshot.drift : 0.0
        return Int64((((Double(s) - snapshot.offset) + d * Double(snapshot.lastUpdate)) / (1.0 + d)).rounded(.toNearestOrEven))
    }
}
