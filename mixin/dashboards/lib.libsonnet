// Grafana dashboard JSON (no grafonnet: it cannot be vendored offline),
// following the dashboard JSON schema of config's grafanaVersion.
{
  local ds = { type: 'prometheus', uid: '${datasource}' },

  datasourceVariable:: {
    type: 'datasource',
    name: 'datasource',
    label: 'Data source',
    query: 'prometheus',
    hide: 0,
    refresh: 1,
  },

  // a variable of a label's values among the series of selector (Grafana's
  // label_values); regex, when given, keeps (and captures) part of a value
  queryVariable(name, label, selector, varLabel, regex=''):: {
    type: 'query',
    name: name,
    label: varLabel,
    datasource: ds,
    query: 'label_values(%s, %s)' % [selector, label],
    refresh: 2,
    sort: 1,
    hide: 0,
    regex: regex,
  },

  // a time series panel at (x, y) of width w: targets are [expr, legend] pairs
  timeseries(title, description, targets, unit, x, y, w=12, h=8):: {
    type: 'timeseries',
    title: title,
    description: description,
    datasource: ds,
    gridPos: { x: x, y: y, w: w, h: h },
    targets: [
      { refId: std.char(65 + i), datasource: ds, expr: targets[i][0], legendFormat: targets[i][1] }
      for i in std.range(0, std.length(targets) - 1)
    ],
    fieldConfig: { defaults: { unit: unit }, overrides: [] },
    options: { legend: { showLegend: true, displayMode: 'list', placement: 'bottom' }, tooltip: { mode: 'multi', sort: 'desc' } },
  },

  // a table of the instant values (labels as columns) of one query
  table(title, description, expr, x, y, w=12, h=8):: {
    type: 'table',
    title: title,
    description: description,
    datasource: ds,
    gridPos: { x: x, y: y, w: w, h: h },
    targets: [{ refId: 'A', datasource: ds, expr: expr, instant: true, format: 'table' }],
    fieldConfig: { defaults: {}, overrides: [] },
    options: { showHeader: true },
  },

  dashboard(uid, title, description, variables, panels, config):: {
    uid: uid,
    title: title,
    description: description,
    tags: config.dashboardTags,
    timezone: 'browser',
    editable: true,
    graphTooltip: 1,
    time: { from: 'now-1h', to: 'now' },
    refresh: config.dashboardRefresh,
    schemaVersion: config.grafanaSchemaVersion,
    templating: { list: variables },
    annotations: { list: [] },
    links: [],
    panels: [panels[i] { id: i + 1 } for i in std.range(0, std.length(panels) - 1)],
  },
}
