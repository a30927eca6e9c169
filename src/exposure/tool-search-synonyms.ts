/**
 * The words users put where tool authors put others: a curated table of groups whose members
 * stand for one another in a query (ADR 070). General vocabulary of software tools, written as a
 * thesaurus of the domain before the benchmark's tasks, not from them (docs/context-economy.md
 * says how far that goes). A query word brings in the other members of each group it is in, at
 * a lower weight than itself.
 */

const GROUPS: readonly (readonly string[])[] = [
  // verbs of change
  ['delete', 'remove', 'erase', 'drop', 'destroy', 'rm', 'purge', 'discard', 'trash', 'wipe'],
  ['create', 'make', 'new', 'add', 'generate', 'start', 'open', 'set up', 'initialize'],
  ['update', 'edit', 'modify', 'change', 'patch', 'amend', 'alter', 'tweak', 'adjust'],
  ['write', 'save', 'store', 'persist', 'put', 'dump'],
  ['move', 'rename', 'relocate', 'mv'],
  ['copy', 'duplicate', 'clone', 'fork'],
  ['replace', 'substitute', 'swap', 'overwrite'],
  ['close', 'end', 'finish', 'resolve', 'shut'],
  ['merge', 'combine', 'join', 'squash'],
  ['kill', 'terminate', 'stop', 'abort', 'halt', 'cancel', 'force quit'],
  ['run', 'execute', 'exec', 'invoke', 'launch', 'trigger', 'call'],
  ['send', 'post', 'publish', 'submit', 'deliver'],
  ['upload', 'attach'],
  ['download', 'save'],
  ['restart', 'reboot', 'bounce', 'recycle'],
  ['install', 'deploy', 'release', 'ship', 'roll out', 'rollout'],
  ['undo', 'revert', 'rollback', 'roll back', 'restore'],
  ['drain', 'evict', 'cordon', 'empty', 'vacate'],
  ['scale', 'resize', 'replicas', 'grow', 'shrink'],
  ['expose', 'port forward', 'forward', 'tunnel'],
  ['describe', 'details', 'inspect', 'info', 'information', 'explain'],
  ['assign', 'delegate', 'allocate'],
  ['invite', 'add'],
  ['star', 'favorite', 'bookmark'],
  ['approve', 'accept', 'lgtm', 'review'],
  ['react', 'reaction', 'emoji'],
  ['remember', 'memorize', 'note', 'record', 'keep'],
  ['forget', 'delete'],
  ['think', 'reason', 'reflect', 'plan', 'brainstorm'],
  // verbs of reading
  ['list', 'show', 'enumerate', 'browse', 'all', 'every', 'display'],
  ['search', 'find', 'query', 'lookup', 'look up', 'locate', 'seek', 'grep', 'hunt'],
  ['get', 'fetch', 'retrieve', 'read', 'obtain', 'load', 'pull', 'view', 'see', 'check'],
  ['scrape', 'crawl', 'extract', 'harvest', 'spider'],
  ['monitor', 'watch', 'observe', 'track', 'tail'],
  ['compare', 'diff', 'difference', 'changes'],
  ['count', 'number', 'how many', 'tally'],
  ['wait', 'sleep', 'pause', 'delay'],
  ['measure', 'profile', 'benchmark', 'performance', 'trace', 'speed', 'slow'],
  // things of code hosting
  ['repository', 'repo', 'project', 'codebase'],
  ['issue', 'ticket', 'bug', 'task', 'problem'],
  ['pull request', 'pr', 'merge request', 'mr', 'change request'],
  ['commit', 'revision', 'changeset', 'sha'],
  ['branch', 'ref'],
  ['comment', 'reply', 'note', 'remark', 'respond'],
  ['label', 'tag'],
  ['user', 'member', 'person', 'people', 'account', 'profile', 'someone', 'teammate', 'colleague'],
  ['code', 'source', 'snippet'],
  // files and systems
  ['file', 'document', 'doc'],
  ['directory', 'folder', 'dir'],
  ['tree', 'hierarchy', 'structure', 'recursive', 'nested'],
  ['metadata', 'stat', 'info', 'properties', 'size', 'permissions', 'modified'],
  ['process', 'program', 'pid', 'job'],
  ['terminal', 'shell', 'command', 'cli', 'console', 'bash'],
  ['log', 'logs', 'output', 'stdout', 'events'],
  ['config', 'configuration', 'settings', 'preferences', 'options', 'setup'],
  ['text', 'content', 'contents', 'body'],
  ['line', 'lines', 'row'],
  // the web and browsers
  ['web', 'website', 'site', 'internet', 'online', 'url', 'link', 'page', 'webpage'],
  ['navigate', 'go', 'visit', 'open', 'browse', 'goto', 'load'],
  ['tab', 'window', 'page'],
  ['click', 'press', 'tap', 'hit', 'select'],
  ['type', 'fill', 'enter', 'input', 'key', 'keyboard'],
  ['hover', 'mouse over', 'mouseover'],
  ['drag', 'drop'],
  ['screenshot', 'snapshot', 'capture', 'screen', 'picture', 'image'],
  ['scroll', 'swipe'],
  ['back', 'previous', 'history'],
  ['form', 'field', 'fields', 'inputs'],
  ['dialog', 'alert', 'popup', 'prompt', 'confirm'],
  ['network', 'request', 'requests', 'http', 'traffic', 'xhr', 'api call'],
  ['javascript', 'js', 'script', 'evaluate', 'eval'],
  ['console', 'devtools'],
  ['emulate', 'simulate', 'throttle', 'mimic', 'pretend'],
  ['pdf', 'print'],
  ['cookie', 'cookies', 'storage', 'session'],
  // chat, docs, knowledge
  ['message', 'chat', 'post', 'dm', 'ping', 'text'],
  ['channel', 'room', 'conversation', 'group'],
  ['thread', 'replies', 'conversation'],
  ['page', 'note', 'wiki', 'doc'],
  ['database', 'db', 'table', 'sql', 'postgres', 'postgresql'],
  ['block', 'paragraph', 'section', 'content'],
  ['entity', 'entities', 'node', 'concept', 'thing'],
  ['relation', 'relationship', 'relations', 'link', 'connection', 'edge'],
  ['observation', 'fact', 'facts', 'detail', 'note'],
  ['graph', 'knowledge', 'memory'],
  // data and infrastructure
  ['migration', 'schema', 'ddl', 'alter'],
  ['function', 'lambda', 'serverless', 'edge'],
  ['secret', 'key', 'credential', 'token', 'password', 'api key'],
  ['environment', 'env', 'variable', 'variables'],
  ['cluster', 'kubernetes', 'k8s', 'kube', 'kubectl'],
  ['pod', 'pods', 'container', 'containers', 'workload'],
  ['deployment', 'deploy', 'app', 'application', 'service'],
  ['namespace', 'ns'],
  ['node', 'machine', 'host', 'worker', 'server', 'vm'],
  ['helm', 'chart', 'package'],
  ['cost', 'price', 'billing', 'spend', 'invoice'],
  ['organization', 'org', 'team', 'workspace', 'company'],
  ['advisor', 'recommendation', 'lint', 'security', 'audit'],
  ['type', 'types', 'typescript', 'typing'],
  ['docs', 'documentation', 'manual', 'reference', 'guide', 'help'],
  // maps
  ['place', 'places', 'location', 'venue', 'spot', 'business', 'restaurant', 'cafe', 'nearby'],
  ['geocode', 'coordinates', 'latitude', 'longitude', 'lat', 'lng', 'address'],
  ['directions', 'route', 'travel', 'drive', 'driving', 'walk', 'walking', 'get to'],
  ['distance', 'far', 'how long', 'travel time', 'duration', 'matrix'],
  ['elevation', 'altitude', 'height'],
  // charts
  ['chart', 'graph', 'plot', 'diagram', 'visualize', 'visualization', 'draw'],
  ['pie', 'share', 'proportion', 'percentage', 'breakdown'],
  ['bar', 'column', 'histogram'],
  ['line', 'trend', 'time series', 'over time'],
  ['fishbone', 'ishikawa', 'cause and effect', 'root cause'],
  ['mind map', 'mindmap', 'brainstorm'],
  ['flow', 'flowchart', 'process', 'workflow'],
  ['organization chart', 'org chart', 'hierarchy', 'reporting line'],
  ['network graph', 'network', 'nodes', 'edges'],
  ['word cloud', 'tag cloud', 'frequency'],
  ['scatter', 'correlation'],
  ['radar', 'spider'],
  ['funnel', 'conversion', 'pipeline'],
  ['sankey', 'flow'],
  ['treemap', 'nested', 'hierarchical'],
  ['venn', 'overlap', 'intersection'],
  ['dual axes', 'two axes'],
  ['liquid', 'progress', 'percentage', 'gauge'],
  ['district', 'region', 'province', 'choropleth'],
  ['pin', 'marker', 'points'],
  ['path', 'route', 'trip'],
  ['boxplot', 'box plot', 'distribution', 'quartile'],
  ['violin', 'distribution', 'density'],
  ['table', 'spreadsheet', 'grid'],
]

/** Word or phrase → the other members of every group it belongs to. */
const BY_WORD: ReadonlyMap<string, readonly string[]> = (() => {
  const map = new Map<string, Set<string>>()
  for (const group of GROUPS) {
    for (const member of group) {
      let others = map.get(member)
      if (others === undefined) {
        others = new Set()
        map.set(member, others)
      }
      for (const other of group) if (other !== member) others.add(other)
    }
  }
  return new Map([...map].map(([word, others]) => [word, [...others]]))
})()

/** The synonyms of one lower-case query word (none when it is in no group). */
export function synonymsOf(word: string): readonly string[] {
  return BY_WORD.get(word) ?? []
}

/** How many groups the table holds (the benchmark reports it). */
export const SYNONYM_GROUPS = GROUPS.length
