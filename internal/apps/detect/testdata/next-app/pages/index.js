export default () => "hi"
