import Foundation
import Simulation
import TestSupport

/// The simulator's history of one or more apps as rows for `EventSeeder`:
/// days `daysAgo` ago up to `endDaysAgo` ago, so every window has closed.
/// Onboarding only unless `laterUse` says otherwise: the regression stories'
/// person counts were sized for `count` onboarding events.
enum SimulatedHistory {
    static func events(
        count: Int, from daysAgo: Double, to endDaysAgo: Double = 2, seed: UInt64, apps: Set<String>,
        plants: [PlantedRegression] = [], laterUse: LaterUse = LaterUse(scale: 0), now: Date = Date()
    ) -> [SeedEvent] {
        var events: [SeedEvent] = []
        HistoryGenerator.generate(
            count: count, from: now.addingTimeInterval(-daysAgo * 86_400), to: now.addingTimeInterval(-endDaysAgo * 86_400), seed: seed,
            apps: apps, plants: plants, laterUse: laterUse
        ) { e in
            events.append(SeedEvent(
                app: e.app, type: e.type, messageId: e.messageId, event: e.event, anonymousId: e.anonymousId, userId: e.userId,
                timestamp: e.timestamp, properties: e.properties, context: e.context, groupId: e.groupId))
        }
        return events
    }
}
