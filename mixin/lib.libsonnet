// Helpers shared by the rules, alerts and dashboards.
{
  // expr joined with target_info's hostname (one target_info per target:
  // topk keeps one when a target has several sources)
  withHostname(expr, selector):: |||
    (%s)
    * on (job, instance) group_left (hostname) topk by (job, instance) (1, target_info{%s})
  ||| % [std.rstripChars(expr, '\n'), selector],
}
