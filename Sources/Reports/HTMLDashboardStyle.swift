extension HTMLDashboard {
    /// The inline stylesheet: system fonts only, readable in print and on a
    /// phone, charts scale to the content width.
    static let stylesheet = """
        :root { --ink: #1f2933; --muted: #616e7c; --line: #d9e2ec; --bg: #f5f7fa; --card: #fff;
          --blue: #2563eb; --blue-soft: rgba(37, 99, 235, 0.16); --red: #c2410c; --red-soft: #fbd5c5;
          --green: #15803d; --amber: #b45309; --amber-soft: #fef3c7; }
        * { box-sizing: border-box; }
        body { margin: 0; padding: 24px 32px 48px; background: var(--bg); color: var(--ink);
          font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
        main, header, nav { max-width: 1120px; margin-left: auto; margin-right: auto; }
        header { margin-bottom: 16px; }
        h1 { font-size: 26px; margin: 8px 0 4px; overflow-wrap: anywhere; }
        h2 { font-size: 18px; margin: 0 0 12px; overflow-wrap: anywhere; }
        a { color: var(--blue); }
        nav { font-size: 14px; display: flex; flex-wrap: wrap; gap: 6px 14px; color: var(--muted); }
        nav .current { font-weight: 600; color: var(--ink); }
        .meta, .muted, .legend { color: var(--muted); font-size: 13px; margin: 4px 0; }
        section { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 16px 20px; margin: 0 0 16px; }
        section.tiles { display: grid; grid-template-columns: repeat(auto-fit, minmax(128px, 1fr)); gap: 12px; background: none; border: 0; padding: 0; }
        .tile { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px; }
        .tile-label { color: var(--muted); font-size: 13px; }
        .tile-value { font-size: 24px; font-weight: 650; font-variant-numeric: tabular-nums; }
        .tile-note { color: var(--muted); font-size: 12px; }
        .tile-note span { white-space: nowrap; }
        #completion-rate { color: var(--blue); }
        .cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(320px, 1fr)); gap: 16px; }
        .card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 16px 18px; min-width: 0; }
        .card p { margin: 4px 0; }
        .big { font-size: 30px; font-weight: 650; color: var(--blue); font-variant-numeric: tabular-nums; }
        .big .ci { font-size: 14px; font-weight: 400; color: var(--muted); }
        .figures { display: grid; grid-template-columns: repeat(4, 1fr); gap: 4px; margin: 10px 0; }
        .figures dt { color: var(--muted); font-size: 12px; }
        .figures dd { margin: 0; font-weight: 600; font-variant-numeric: tabular-nums; }
        .badge { display: inline-block; padding: 1px 8px; border-radius: 999px; font-size: 12px; font-weight: 600; vertical-align: middle; }
        .badge.met { background: #dcfce7; color: var(--green); }
        .badge.missed { background: #fee2e2; color: #b91c1c; }
        .badge.none { background: #e5e7eb; color: var(--muted); }
        .badge.progress { background: var(--amber-soft); color: var(--amber); }
        .alerts { border-radius: 8px; padding: 10px 16px; margin: 12px 0; }
        .alerts.alarm { background: #fee2e2; border: 1px solid #fca5a5; }
        .alerts.alarm h2 { color: #b91c1c; }
        .alerts.quiet { background: var(--card); border: 1px solid var(--line); }
        .alerts ul { margin: 4px 0; padding-left: 20px; }
        .alerts li { padding: 2px 0; }
        .alerts a { color: inherit; }
        .targets ul { list-style: none; padding: 0; margin: 0; }
        .targets li { padding: 3px 0; }
        table { border-collapse: collapse; width: 100%; font-size: 14px; font-variant-numeric: tabular-nums; }
        th, td { padding: 5px 8px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: middle; }
        th { color: var(--muted); font-weight: 600; font-size: 13px; }
        td:nth-child(2) { overflow-wrap: anywhere; }
        .num { text-align: right; white-space: nowrap; }
        tr.optional td { color: var(--muted); font-style: italic; }
        tr.in-progress td { background: var(--amber-soft); }
        tr.significant td { background: #eef2ff; font-weight: 600; }
        .chart { display: block; width: 100%; height: auto; }
        .chart text { font-size: 13px; fill: var(--ink); }
        .chart .label { font-size: 14px; }
        .chart .value { font-size: 14px; font-weight: 600; }
        .chart .drop { font-size: 12px; fill: var(--red); }
        .chart .axis { font-size: 12px; fill: var(--muted); }
        .chart .axis-title { font-size: 12px; fill: var(--muted); }
        .paths text { font-size: 12px; fill: var(--ink); }
        .paths .root rect { fill: var(--blue); } .paths .root text { fill: #fff; }
        .paths .level1 rect { fill: #7d93e8; } .paths .level2 rect { fill: #a5b4fc; } .paths .level3 rect { fill: #c7d2fe; }
        .paths .other rect { fill: #eef0f4; } .paths .none rect { fill: #dde1e8; }
        .chart .track { fill: #eef2f6; }
        .chart .bar { fill: var(--blue); }
        .chart .bar.optional { fill: #93b4f5; stroke: var(--blue); stroke-dasharray: 4 3; }
        .chart .lost { fill: var(--red-soft); }
        .chart .grid { stroke: var(--line); stroke-width: 1; }
        .chart .baseline, .chart .tick { stroke: var(--muted); stroke-width: 1; }
        .chart .band { fill: var(--blue-soft); stroke: none; }
        .chart .whisker { stroke: #93b4f5; stroke-width: 2; }
        .chart .trend { stroke: var(--blue); stroke-width: 2.5; }
        .chart .trend.dashed { stroke-dasharray: 6 5; stroke: var(--amber); }
        .chart .point { fill: var(--blue); stroke: #fff; stroke-width: 1.5; }
        .chart .point.open, .sparkline .point.open { fill: #fff; stroke: var(--amber); stroke-width: 2; }
        .chart .hatch-bg { fill: var(--amber-soft); }
        .chart .hatch-line { stroke: #f6d38a; stroke-width: 3; }
        .chart .zone-label { fill: var(--amber); font-weight: 600; font-size: 12px; }
        .chart .zone-label, .chart .target-label, .chart .marker-label { paint-order: stroke; stroke: #fff; stroke-width: 4px; stroke-linejoin: round; }
        .chart .target-line { stroke: var(--green); stroke-width: 1.5; stroke-dasharray: 8 4; }
        .chart .target-label { fill: var(--green); font-weight: 600; font-size: 12px; }
        .chart .hist { fill: #60a5fa; }
        .chart .hist.overflow { fill: #cbd5e1; }
        .chart .marker { stroke-width: 2; }
        .chart .marker.median { stroke: var(--ink); }
        .chart .marker.p90 { stroke: var(--red); stroke-dasharray: 5 3; }
        .chart .marker-label { font-size: 12px; font-weight: 600; }
        .chart .marker-label.p90 { fill: var(--red); }
        .chart.drivers .ci { stroke-width: 2.5; }
        .chart.drivers .negative .ci { stroke: var(--red); }
        .chart.drivers .negative .point { fill: var(--red); }
        .chart.drivers .positive .ci { stroke: var(--green); }
        .chart.drivers .positive .point { fill: var(--green); }
        .chart .curve { stroke-width: 2.5; }
        .chart .curve.completers, .chart .whisker.completers { stroke: var(--blue); }
        .chart .curve.non-completers, .chart .whisker.non-completers { stroke: var(--red); stroke-dasharray: 7 4; }
        .chart .band.completers { fill: var(--blue-soft); }
        .chart .band.non-completers { fill: rgba(194, 65, 12, 0.14); }
        .chart .point.completers { fill: var(--blue); }
        .chart .point.non-completers { fill: var(--red); }
        .swatch.line.non-completers { background: var(--red); }
        .swatch.band.non-completers { background: rgba(194, 65, 12, 0.14); }
        .next-events { display: grid; grid-template-columns: repeat(auto-fill, minmax(300px, 1fr)); gap: 12px 24px; }
        .next-events h3 { font-size: 14px; margin: 4px 0; }
        .chart .empty-label { fill: var(--muted); font-size: 15px; }
        .ratebar { display: block; }
        .ratebar .scale { stroke: var(--line); stroke-width: 2; }
        .ratebar .ci { fill: var(--blue-soft); }
        .ratebar .dot { fill: var(--blue); }
        .sparkline { display: block; width: 100%; height: 44px; margin: 6px 0; }
        .sparkline .spark { fill: none; stroke: var(--blue); stroke-width: 2; }
        .swatch { display: inline-block; width: 14px; height: 10px; margin: 0 4px 0 10px; vertical-align: baseline; border-radius: 2px; }
        .swatch.bar { background: var(--blue); }
        .swatch.lost { background: var(--red-soft); }
        .swatch.optional { background: #93b4f5; }
        .swatch.line { height: 3px; background: var(--blue); vertical-align: middle; }
        .swatch.band { background: var(--blue-soft); }
        .swatch.hatch { background: repeating-linear-gradient(45deg, var(--amber-soft) 0 3px, #f6d38a 3px 5px); }
        @media print { body { background: #fff; padding: 0; } section, .card, .tile { break-inside: avoid; } }
        """
}
