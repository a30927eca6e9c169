// Fails fast when the scripts run on a Node older than the one Barbican supports, which happens
// when the pinned Node (devDependency "node") is missing from node_modules/.bin.
const [major, minor] = process.versions.node.split('.').map(Number)
if (major < 22 || (major === 22 && minor < 18)) {
  console.error(`Node.js ${process.versions.node} found; Barbican needs >= 22.18. Run npm install.`)
  process.exit(1)
}
