import './console.css';
import { ConsoleApp } from './console-app';

customElements.define('mission-console', ConsoleApp);
