import Testing
@testable import Funnels

@Suite struct FunnelEvaluatorTests {
    let abc = linearFunnel(["a", "b", "c"])
    let now = base + 30 * 86_400 * second

    @Test func outOfOrderArrivalIsSortedByTime() {
        let outcome = FunnelEvaluator.evaluate(
            events: [track("c", at: 30), track("a", at: 10), track("b", at: 20)], funnel: abc, now: now
        )
        #expect(outcome.level == 3)
        #expect(outcome.completed)
        #expect(outcome.secondsToComplete == 20)
        #expect(outcome.stepTimes.map(rel) == [10, 20, 30])
        #expect(rel(outcome.startTime) == 10)
    }

    @Test func duplicateMessageIdsCountOnce() {
        let twice = linearFunnel(["a", "a"])
        let duplicated = FunnelEvaluator.evaluate(
            events: [track("a", at: 1, id: "m1"), track("a", at: 1, id: "m1")], funnel: twice, now: now
        )
        #expect(duplicated.level == 1)
        let distinct = FunnelEvaluator.evaluate(
            events: [track("a", at: 1, id: "m1"), track("a", at: 1, id: "m2")], funnel: twice, now: now
        )
        #expect(distinct.level == 2)
        // A duplicate of a later step does not complete the funnel either.
        let abcDuplicate = FunnelEvaluator.evaluate(
            events: [track("a", at: 0, id: "x"), track("b", at: 5, id: "x"), track("c", at: 9)], funnel: abc, now: now
        )
        #expect(abcDuplicate.level == 1)
    }

    @Test func repeatedStepUsesLatestStart() {
        let outcome = FunnelEvaluator.evaluate(
            events: [track("a", at: 0), track("a", at: 100), track("b", at: 200), track("b", at: 300), track("c", at: 400)],
            funnel: abc, now: now
        )
        #expect(outcome.level == 3)
        #expect(rel(outcome.chainStartTime) == 100)
        #expect(rel(outcome.completionTime) == 400)
        #expect(outcome.secondsToComplete == 300)
        // The chain takes the earliest b after the start.
        #expect(outcome.stepTimes.map(rel) == [100, 200, 400])
        #expect(rel(outcome.startTime) == 0)
    }

    @Test func restartAfterAbandoningCompletesOnSecondAttempt() {
        let funnel = linearFunnel(["a", "b", "c"], window: 3_600)
        let day: Int64 = 86_400
        let outcome = FunnelEvaluator.evaluate(
            events: [
                track("a", at: 0), track("b", at: 60),                                  // abandoned
                track("a", at: 2 * day), track("b", at: 2 * day + 60), track("c", at: 2 * day + 120),
            ],
            funnel: funnel, now: now
        )
        #expect(outcome.completed)
        #expect(rel(outcome.startTime) == 0)            // cohort: first attempt
        #expect(rel(outcome.chainStartTime) == 2 * day) // time: the completing chain
        #expect(outcome.secondsToComplete == 120)
        #expect(!outcome.inProgress)
    }

    @Test func anyOfStepTakenByEitherBranch() throws {
        let funnel = try #require(try FunnelConfiguration.default().funnel(named: "umuve_onboarding"))
        func page(_ n: String, at t: Int64) -> FunnelEvent {
            track("onboarding_screen_viewed", at: t, ["properties.page": n])
        }
        let skipped = [page("1", at: 0), track("onboarding_skipped", at: 5),
                       track("apple_sign_in_completed", at: 9), track("main_screen_viewed", at: 12)]
        let paged = [page("1", at: 0), page("2", at: 3), page("3", at: 6),
                     track("apple_sign_in_completed", at: 9), track("main_screen_viewed", at: 12)]
        let stuck = [page("1", at: 0), page("2", at: 3), track("apple_sign_in_completed", at: 9)]
        #expect(FunnelEvaluator.evaluate(events: skipped, funnel: funnel, now: now).level == 4)
        let viaPage = FunnelEvaluator.evaluate(events: paged, funnel: funnel, now: now)
        #expect(viaPage.level == 4)
        #expect(viaPage.stepTimes.map(rel) == [0, 6, 9, 12])
        #expect(FunnelEvaluator.evaluate(events: stuck, funnel: funnel, now: now).level == 1)
    }

    @Test func optionalStepDoneAndSkipped() {
        let funnel = Funnel(
            name: "opt", app: "x",
            steps: [FunnelStep(.event("a")), FunnelStep(.event("o"), isOptional: true), FunnelStep(.event("b")), FunnelStep(.event("c"))]
        )
        let done = FunnelEvaluator.evaluate(
            events: [track("a", at: 0), track("o", at: 10), track("b", at: 20), track("c", at: 30)], funnel: funnel, now: now
        )
        #expect(done.level == 3)
        #expect(done.completed)
        #expect(done.optionalStepsDone == [1])
        #expect(done.stepTimes.map(rel) == [0, 10, 20, 30])
        #expect(done.secondsToComplete == 30)

        let skipped = FunnelEvaluator.evaluate(
            events: [track("o", at: -5), track("a", at: 0), track("b", at: 20), track("c", at: 30), track("o", at: 40)],
            funnel: funnel, now: now
        )
        #expect(skipped.completed)
        #expect(skipped.optionalStepsDone.isEmpty)
        #expect(skipped.stepTimes.map(rel) == [0, nil, 20, 30])

        // An optional step never raises the level on its own.
        let onlyOptional = FunnelEvaluator.evaluate(events: [track("a", at: 0), track("o", at: 1)], funnel: funnel, now: now)
        #expect(onlyOptional.level == 1)
        #expect(onlyOptional.optionalStepsDone.isEmpty) // b not reached: not meaningful
    }

    @Test func excludedEventBetweenStartAndLastStep() {
        let funnel = linearFunnel(["a", "b", "c"], exclusions: [.event("account_deleted")])
        let inside = FunnelEvaluator.evaluate(
            events: [track("a", at: 0), track("b", at: 10), track("account_deleted", at: 20), track("c", at: 30)],
            funnel: funnel, now: now
        )
        #expect(inside.excluded)
        let after = FunnelEvaluator.evaluate(
            events: [track("a", at: 0), track("b", at: 10), track("c", at: 30), track("account_deleted", at: 40)],
            funnel: funnel, now: now
        )
        #expect(!after.excluded)
        let before = FunnelEvaluator.evaluate(
            events: [track("account_deleted", at: -1), track("a", at: 0), track("b", at: 10)], funnel: funnel, now: now
        )
        #expect(!before.excluded)
        // Dropped off at b; deletion after b is outside [start, last reached step].
        let droppedThenDeleted = FunnelEvaluator.evaluate(
            events: [track("a", at: 0), track("b", at: 10), track("account_deleted", at: 11)], funnel: funnel, now: now
        )
        #expect(!droppedThenDeleted.excluded)
    }

    @Test func personInsideWindowIsInProgressNotDroppedOff() {
        let events = [track("a", at: 0), track("b", at: 10)]
        let early = FunnelEvaluator.evaluate(events: events, funnel: abc, now: base + 3_600 * second)
        #expect(early.level == 2)
        #expect(early.inProgress)
        let late = FunnelEvaluator.evaluate(events: events, funnel: abc, now: base + 86_400 * second)
        #expect(!late.inProgress) // start + window == now: closed
        let justOpen = FunnelEvaluator.evaluate(events: events, funnel: abc, now: base + 86_400 * second - 1)
        #expect(justOpen.inProgress)
        // A later step-1 event reopens the window.
        let restarted = FunnelEvaluator.evaluate(
            events: events + [track("a", at: 2 * 86_400)], funnel: abc, now: base + 2 * 86_400 * second + 1
        )
        #expect(restarted.inProgress)
        #expect(restarted.level == 2)
    }

    @Test func windowEdgeIsInclusive() {
        let funnel = linearFunnel(["a", "b"], window: 86_400)
        let atEdge = FunnelEvaluator.evaluate(events: [track("a", at: 0), track("b", at: 86_400)], funnel: funnel, now: now)
        #expect(atEdge.level == 2)
        #expect(atEdge.secondsToComplete == 86_400)
        let pastEdge = FunnelEvaluator.evaluate(events: [track("a", at: 0), track("b", at: 86_401)], funnel: funnel, now: now)
        #expect(pastEdge.level == 1)
        var microPast = track("b", at: 86_400)
        microPast.timestamp += 1
        #expect(FunnelEvaluator.evaluate(events: [track("a", at: 0), microPast], funnel: funnel, now: now).level == 1)
    }

    @Test func equalTimestampsReachStepsInOrder() {
        // Given in reverse order, same second: still steps 1 then 2.
        let outcome = FunnelEvaluator.evaluate(events: [track("b", at: 5), track("a", at: 5)], funnel: abc, now: now)
        #expect(outcome.level == 2)
        #expect(outcome.stepTimes.map(rel) == [5, 5, nil])

        // Same-time events that each match several steps are matched, not
        // greedily assigned: X fits {2}, Y fits {1,3}, Z fits {1}.
        let funnel = Funnel(name: "tie", app: "x", steps: [
            FunnelStep(matchers: [.event("y"), .event("z")]),
            FunnelStep(.event("x")),
            FunnelStep(.event("y")),
        ])
        let tie = FunnelEvaluator.evaluate(events: [track("y", at: 1), track("x", at: 1), track("z", at: 1)], funnel: funnel, now: now)
        #expect(tie.level == 3)
        #expect(tie.secondsToComplete == 0)

        // One event never fills two steps.
        let single = FunnelEvaluator.evaluate(events: [track("y", at: 1)], funnel: funnel, now: now)
        #expect(single.level == 1)
    }

    @Test func anonymousThenLoggedInIsOnePerson() {
        struct Message { var anonymousId: String?; var userId: String?; var event: FunnelEvent }
        let messages = [
            Message(anonymousId: "device-1", userId: nil, event: track("a", at: 0)),
            Message(anonymousId: "device-1", userId: nil, event: track("b", at: 10)),
            Message(anonymousId: "device-1", userId: "user-9", event: FunnelEvent(messageId: "id1", kind: .identify, name: nil, timestamp: base + 20 * second, attributes: [:])),
            Message(anonymousId: nil, userId: "user-9", event: track("c", at: 30)),
        ]
        let links = IdentityResolver.links(from: messages.map {
            IdentityObservation(anonymousId: $0.anonymousId, userId: $0.userId, timestamp: $0.event.timestamp)
        })
        let persons = Dictionary(grouping: messages) {
            IdentityResolver.personId(anonymousId: $0.anonymousId, userId: $0.userId, links: links) ?? "?"
        }
        #expect(persons.keys.sorted() == ["user-9"])
        let outcome = FunnelEvaluator.evaluate(events: persons["user-9", default: []].map(\.event), funnel: abc, now: now)
        #expect(outcome.completed)
        #expect(outcome.secondsToComplete == 30)
    }

    @Test func breakdownValuesComeFromFirstStepOneEvent() {
        let funnel = Funnel(name: "b", app: "x", steps: [FunnelStep(.event("a")), FunnelStep(.event("b"))],
                            breakdowns: ["context.os.name", "properties.auth_method", "context.app.version"])
        let outcome = FunnelEvaluator.evaluate(events: [
            track("a", at: 0, ["context.os.name": "iOS"]),
            track("a", at: 5, ["context.os.name": "Android", "context.app.version": "2.0"]),
            track("b", at: 9, ["properties.auth_method": "google"]),
        ], funnel: funnel, now: now)
        #expect(outcome.breakdown == [
            "context.os.name": "iOS",
            "properties.auth_method": "google",  // not on step 1: first later event carrying it
            "context.app.version": "2.0",
        ])
        let none = FunnelEvaluator.evaluate(events: [track("a", at: 0)], funnel: funnel, now: now)
        #expect(none.breakdown["context.os.name"] == "(none)")
        // Only within the first start's window: a value first seen days later is not the person's at their start.
        let late = FunnelEvaluator.evaluate(events: [
            track("a", at: 0), track("x", at: funnel.windowSeconds, ["context.os.name": "iOS"]),
            track("y", at: funnel.windowSeconds + 1, ["properties.auth_method": "apple"]),
        ], funnel: funnel, now: now)
        #expect(late.breakdown["context.os.name"] == "iOS" && late.breakdown["properties.auth_method"] == "(none)")
    }

    @Test func noStepOneMeansLevelZero() {
        let outcome = FunnelEvaluator.evaluate(events: [track("b", at: 0), track("c", at: 1)], funnel: abc, now: now)
        #expect(outcome.level == 0)
        #expect(outcome.startTime == nil)
        #expect(!outcome.inProgress)
        #expect(outcome.stepTimes == [nil, nil, nil])
    }

    @Test func screensMatchOnlyScreensWithFilters() {
        let funnel = Funnel(name: "s", app: "ops", steps: [
            FunnelStep(.screen("welcome", where: ["properties.flow": "employee"])),
            FunnelStep(.screen("signup", where: ["properties.flow": "employee"])),
        ])
        let outcome = FunnelEvaluator.evaluate(events: [
            screen("welcome", at: 0, ["properties.flow": "employee"]),
            track("signup", at: 1, ["properties.flow": "employee"]),       // a track, not a screen
            screen("signup", at: 2, ["properties.flow": "company_creator"]), // other flow
            screen("signup", at: 3),                                         // filter path missing
        ], funnel: funnel, now: now)
        #expect(outcome.level == 1)
    }

    @Test func manyEventsStayFast() {
        // 20 000 events in one timeline, half sharing one timestamp: must not blow up.
        let funnel = linearFunnel(["a", "b", "c", "d"])
        var events: [FunnelEvent] = []
        for index in 0..<10_000 {
            events.append(track(["a", "b", "c", "d"][index % 4], at: Int64(index), id: "s\(index)"))
            events.append(track(["a", "b", "c", "d"][index % 4], at: 50_000, id: "t\(index)"))
        }
        let outcome = FunnelEvaluator.evaluate(events: events, funnel: funnel, now: now)
        #expect(outcome.level == 4)
        #expect(outcome.secondsToComplete == 3)
    }
}
